"""The term selection rewriter: its features on hand-made texts, the choice of terms, the model file's errors
(the stage end to end on a fixture index: test_rewrite_terms_index.py)."""

from __future__ import annotations

import json
import math

import pytest

from cast.errors import DataFormatError
from cast.rewrite.terms import (
    FEATURES,
    MODEL_FILE,
    AnalysedText,
    PastText,
    TermSelectorModel,
    Word,
    chosen_terms,
    term_features,
)


def text(
    sentences: list[list[tuple[str, str]]], capitalised: tuple[str, ...] = (), tokens: str = ""
) -> AnalysedText:
    """An analysed text from ``[[(word, tag), ...], ...]`` (a word's term is the word lower-cased)."""
    flat = [(w, tag, n) for n, sentence in enumerate(sentences) for w, tag in sentence]
    last = max(len(flat) - 1, 1)
    words = tuple(
        Word(w, w.lower(), tag, w in capitalised, sentence=n, position=i / last)
        for i, (w, tag, n) in enumerate(flat)
    )
    terms = tuple(frozenset(w.lower() for w, _ in sentence) for sentence in sentences)
    return AnalysedText(words, terms, frozenset(tokens.split()) | {w.lower() for w, _, _ in flat})


def test_term_features_by_hand():
    # Turn 1: "Tell me about throat cancer." / "Throat cancer is treated by surgery. Radiotherapy helps too."
    # Turn 2: "Is it painful after surgery?"
    first = PastText(
        text([[("throat", "NN"), ("cancer", "NN")]]),
        frozenset({"throat", "cancer"}),
        text(
            [
                [("Throat", "NN"), ("cancer", "NN"), ("treated", "VBN"), ("surgery", "NN")],
                [("Radiotherapy", "NNP"), ("helps", "VBZ")],
            ]
        ),  # fmt: skip
    )
    current = text([[("painful", "JJ"), ("surgery", "NN")]], tokens="is it after")
    idf = {"throat": 3.0, "cancer": 2.0, "treated": 1.5, "surgery": 2.5, "radiotherapy": 4.0, "helps": 1.0,
           "painful": 2.2}  # fmt: skip
    features = term_features([first], current, idf)

    assert set(features) == {
        "throat",
        "cancer",
        "treated",
        "radiotherapy",
        "helps",
    }  # surgery is in the utterance
    throat = features["throat"]
    assert set(throat) == set(FEATURES)
    assert throat["idf"] == 3.0
    assert throat["past_turns"] == 1.0
    assert (throat["utterance_recency"], throat["utterance_share"], throat["in_first_utterance"]) == (
        1.0,
        1.0,
        1.0,
    )
    assert (throat["response_recency"], throat["response_share"]) == (1.0, 1.0)
    assert throat["last_response_count"] == pytest.approx(math.log(2))
    assert throat["response_count"] == pytest.approx(math.log(2))
    assert throat["last_response_position"] == 0.0
    assert throat["noun"] == 1.0 and throat["proper_noun"] == 0.0
    assert throat["in_previous_query"] == 1.0 and throat["query_share"] == 1.0
    # The response's first sentence holds "surgery", one of the utterance's two terms.
    assert throat["shares_sentence"] == 0.5
    assert throat["utterance_words"] == 2.0 and throat["utterance_best_idf"] == 2.5
    assert throat["refers_back"] == 1.0  # "it"
    assert throat["has_response"] == 1.0

    radiotherapy = features["radiotherapy"]
    assert (radiotherapy["utterance_recency"], radiotherapy["in_first_utterance"]) == (0.0, 0.0)
    assert radiotherapy["response_recency"] == 1.0
    assert radiotherapy["last_response_position"] == pytest.approx(4 / 5)
    assert radiotherapy["proper_noun"] == 1.0
    assert radiotherapy["shares_sentence"] == 0.0
    assert radiotherapy["in_previous_query"] == 0.0
    assert features["treated"]["verb"] == 1.0


def test_recency_counts_back_from_the_current_turn():
    old = PastText(text([[("doha", "NNP")]]), frozenset({"doha"}), None)
    other = PastText(text([[("museums", "NNS")]]), frozenset({"museums"}), None)
    features = term_features(
        [old, other, other], text([[("lamb", "NN")]]), {"doha": 8, "museums": 5, "lamb": 6}
    )
    assert features["doha"]["utterance_recency"] == pytest.approx(1 / 3)
    assert features["doha"]["utterance_share"] == pytest.approx(1 / 3)
    assert features["museums"]["utterance_recency"] == 1.0
    assert features["museums"]["in_first_utterance"] == 0.0
    assert features["doha"]["has_response"] == 0.0 and features["doha"]["last_response_position"] == 1.0
    assert features["doha"]["refers_back"] == 0.0


def test_chosen_terms_keep_the_most_probable_above_the_threshold():
    probabilities = {"doha": 0.9, "qatar": 0.4, "desert": 0.4, "tours": 0.1}
    assert chosen_terms(probabilities, 0.3, 10) == ["doha", "desert", "qatar"]  # ties by term
    assert chosen_terms(probabilities, 0.3, 2) == ["doha", "desert"]
    assert chosen_terms(probabilities, 0.95, 10) == []


def stump_model(path, feature: str, threshold: float = 0.5) -> str:
    """A one-tree model: P = sigmoid(+4) when ``feature`` > 0.5, sigmoid(-4) otherwise."""
    tree = {"left": [1, -1, -1], "right": [2, -1, -1], "feature": [FEATURES.index(feature), 0, 0],
            "threshold": [0.5, 0, 0], "value": [0.0, -4.0, 4.0]}  # fmt: skip
    data = {"features": list(FEATURES), "threshold": threshold, "recorded": {"version": "stump"},
            "trees": [tree], "init": 0.0, "rate": 1.0}  # fmt: skip
    path.write_text(json.dumps(data))
    return str(path)


def test_a_missing_or_foreign_model_file_says_how_to_make_one(tmp_path):
    with pytest.raises(DataFormatError, match="cast train term-selector"):
        TermSelectorModel.load(tmp_path / "absent.json")
    stale = json.loads(open(stump_model(tmp_path / "m.json", "idf")).read())
    stale["features"] = ["idf"]
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    with pytest.raises(DataFormatError, match="other features"):
        TermSelectorModel.load(tmp_path / "stale.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(DataFormatError, match="not a term selection model"):
        TermSelectorModel.load(tmp_path / "broken.json")


def test_the_bundled_model_loads_with_its_recorded_figures():
    model = TermSelectorModel.load(MODEL_FILE)
    assert 0 < model.threshold < 1
    assert model.recorded["version"].startswith("terms-gbt")
    assert 0 < model.recorded["out_of_fold_ikat2023_train_mrr"] < 1
