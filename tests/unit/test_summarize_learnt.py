"""The learnt extractive generator: its features on hand-made passages, a scorer trained in the test choosing
sentences through the shipped code path, and the bundled model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cast.core.records import Passage, ScoredPassage, Selection
from cast.core.registry import build_stage
from cast.errors import DataFormatError
from cast.infra.resources import Resources
from cast.infra.text import count_words
from cast.infra.trees import export
from cast.summarize.entity_extractive import EntityExtractiveSummarizer
from cast.summarize.learnt_extractive import FEATURES, question_type, sentence_features

CURIE = "http://dbpedia.org/resource/Marie_Curie"
P1 = (
    "Marie Curie was a Polish and naturalised-French physicist and chemist. She was born in Warsaw in 1867. "
    "It was a cold winter."
)
P2 = "Radium was discovered because pitchblende was more radioactive than uranium. Marie Curie named it radium."


def selection() -> Selection:
    passages = (
        ScoredPassage(Passage("p1", P1, title="Marie Curie"), 2.0),
        ScoredPassage(Passage("p2", P2, title="Radium"), 1.0),
    )
    explanation = {
        "entity_ranks": {CURIE: 1.0},
        "query_entities": [{"surface": "Marie Curie", "entity": CURIE}],
        "passage_entities": {
            "p1": [{"surface": "Marie Curie", "start": 0, "end": 11, "entity": CURIE}],
            "p2": [
                {
                    "surface": "Marie Curie",
                    "start": P2.index("Marie"),
                    "end": P2.index("Marie") + 11,
                    "entity": CURIE,
                }
            ],
        },
    }
    return Selection(passages, "eg", scores={"p1": 0.9, "p2": 0.3}, explanation=explanation)


def features_by_sentence(question: str) -> dict[str, dict[str, float]]:
    chosen = selection()
    candidates = EntityExtractiveSummarizer().candidates(chosen)
    rows = sentence_features(question, chosen, candidates)
    return {c.text: dict(zip(FEATURES, row, strict=True)) for c, row in zip(candidates, rows, strict=True)}


def test_features_of_hand_made_sentences() -> None:
    features = features_by_sentence("When was Marie Curie born?")
    lead = features["Marie Curie was a Polish and naturalised-French physicist and chemist."]
    born = features["She was born in Warsaw in 1867."]
    cause = features["Radium was discovered because pitchblende was more radioactive than uranium."]
    assert (lead["first_sentence"], lead["passage_rank"], lead["sentence_index"]) == (1.0, 0.0, 0.0)
    assert (born["first_sentence"], born["sentence_index"], born["relative_position"]) == (
        0.0,
        1.0,
        pytest.approx(1 / 3),
    )
    assert cause["passage_rank"] == 1.0
    # the selection's scores 0.9 and 0.3, min-max normalised
    assert (lead["passage_score"], cause["passage_score"]) == (1.0, 0.0)
    assert lead["title_match"] == 1.0 and lead["query_entity"] == 1.0 and lead["entity_mass"] == 1.0
    assert born["title_match"] == 0.0 and born["entity_count"] == 0.0
    assert (born["has_year"], born["has_digit"], born["pronoun_start"]) == (1.0, 1.0, 1.0)
    assert (cause["has_cause"], lead["has_cause"]) == (1.0, 0.0)
    assert lead["is_definition"] == 1.0 and born["is_definition"] == 0.0
    assert born["asks_when"] == 1.0 and born["asks_what"] == 0.0
    # "born" is the question's one content word the lead lacks
    assert born["question_match"] > 0 and lead["question_match"] > 0
    assert 0.0 < lead["centrality"] < 1.0


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("Who discovered radium?", {"asks_who"}),
        ("I remember Glasgow hosting COP26 last year, but what was it about?", {"asks_what"}),
        ("Is it safe?", {"asks_yes_no"}),
        ("So tell me more about the treatment.", {"asks_request"}),
        ("How much does it cost?", {"asks_how", "asks_quantity"}),
        ("Radium.", set()),
    ],
)
def test_the_kind_of_answer_a_question_asks_for(question: str, kinds: set[str]) -> None:
    assert {k for k, v in question_type(question).items() if v} == kinds


def write_scorer(path: Path, favoured: str) -> Path:
    """A regressor trained to score sentences by one feature alone, exported as the generator reads it."""
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    rows = rng.integers(0, 2, size=(200, len(FEATURES))).astype(float)
    targets = rows[:, FEATURES.index(favoured)]
    model = GradientBoostingRegressor(n_estimators=20, max_depth=2, random_state=0).fit(rows, targets)
    path.write_text(json.dumps({"features": list(FEATURES), **export(model)}))
    return path


def stage(**settings):
    return build_stage("summarizer", {"name": "learnt_extractive", **settings}, Resources({}))


def test_a_scorer_that_favours_years_answers_with_the_year(tmp_path: Path) -> None:
    summarizer = stage(model=str(write_scorer(tmp_path / "years.json", "has_year")), words=18, fill=False)
    answer = summarizer.summarize("Tell me about Marie Curie.", selection())
    # "She ..." reads only after the sentence it refers to.
    assert (
        answer.text
        == "Marie Curie was a Polish and naturalised-French physicist and chemist. She was born in Warsaw in 1867."
    )
    assert [s.passage_id for s in answer.sentences] == ["p1", "p1"]
    described = summarizer.describe()
    assert described["name"] == "learnt_extractive" and described["words"] == 18
    assert described["scorer"]["file"] == "years.json" and len(described["scorer"]["sha256"]) == 16


def test_a_scorer_that_favours_causes_answers_with_the_cause(tmp_path: Path) -> None:
    summarizer = stage(model=str(write_scorer(tmp_path / "causes.json", "has_cause")), words=12, fill=False)
    answer = summarizer.summarize("Why?", selection())
    assert answer.text == "Radium was discovered because pitchblende was more radioactive than uranium."
    assert answer.sentences[0].passage_id == "p2"


def test_a_model_of_other_features_is_refused_naming_the_retraining(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    data = json.loads(write_scorer(tmp_path / "m.json", "has_year").read_text())
    other.write_text(json.dumps({**data, "features": ["words"]}))
    with pytest.raises(
        DataFormatError, match="trained on other features; retrain it with cast train sentence-scorer"
    ):
        stage(model=str(other))
    with pytest.raises(DataFormatError, match="no such model file"):
        stage(model=str(tmp_path / "missing.json"))


@pytest.mark.parametrize("words", [10, 70])
def test_the_bundled_scorer_answers_in_budget_from_the_passages(words: int) -> None:
    answer = stage(words=words).summarize("When was Marie Curie born?", selection())
    assert count_words(answer.text) <= words
    texts = {"p1": P1, "p2": P2}
    for sentence in answer.sentences:
        assert sentence.text.rstrip("…") in texts[sentence.passage_id]
    assert len({s.text for s in answer.sentences}) == len(answer.sentences)
