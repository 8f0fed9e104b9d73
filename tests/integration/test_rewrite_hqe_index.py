"""HQE's expansion on a 20-passage fixture index whose document frequencies are chosen so that every
importance can be checked by hand, and its spaCy model's errors."""

from __future__ import annotations

import math

import pytest
from tiny_index import tiny_index

from cast.core.records import PastTurn, Turn
from cast.core.registry import build_stage
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.resources import Resources

# Document frequencies in the fixture (N = 20): throat 1, lung 1, treatable 2, symptoms 2, cancer 5, disease 10.
FIXTURE_PASSAGES = [
    "throat cancer symptoms disease",
    "cancer treatable symptoms disease",
    "cancer treatable disease",
    "cancer disease lung",
    "cancer disease",
    *["disease"] * 5,
    *[
        f"garden {word}"
        for word in "roses tulips lilies daisies ferns mosses orchids violets poppies irises".split()
    ],
]
IDF = {df: math.log(1 + (20 - df + 0.5) / (df + 0.5)) for df in (1, 2, 5, 10)}  # 2.639, 2.128, 1.340, 0.693


@pytest.fixture(scope="session")
def fixture_index(tmp_path_factory):
    return tiny_index(tmp_path_factory.mktemp("hqe-index"), FIXTURE_PASSAGES)


def turn(n: int, utterance: str) -> Turn:
    return Turn(qid=f"1_{n}", topic_id="1", turn_id=str(n), utterance=utterance)


CONVERSATION = ["What is throat cancer?", "Is it treatable?", "What are the symptoms of the disease?"]


@pytest.mark.parametrize("keyword_filter", ["stopwords", "pos"])
def test_hqe_expansion_on_the_fixture_index(fixture_index, keyword_filter):
    resources = Resources({"index": str(fixture_index), "stemmer": "krovetz", "cache_dir": None})
    settings = {
        "name": "hqe",
        "r_topic": 2.5,
        "r_sub": 1.0,
        "eta": 2.2,
        "m": 1,
        "keyword_filter": keyword_filter,
        "importance": "index",  # the fixture's own idf (a collection this small reads English frequencies by default)
    }
    hqe = build_stage("rewriter", settings, resources)
    turns = [turn(n, u) for n, u in enumerate(CONVERSATION, start=1)]
    history = [PastTurn(turn=t, query=t.utterance) for t in turns]

    first = hqe.rewrite([], turns[0])
    assert first.query == "What is throat cancer?"

    # Turn 2: best word "treatable" (df 2, idf 2.128) <= eta: ambiguous; turn 1 gives topic "throat" (df 1,
    # idf 2.639 >= r_topic) and subtopic "cancer" (df 5, idf 1.340).
    second = hqe.rewrite(history[:1], turns[1])
    assert second.query == "throat cancer Is it treatable?"
    # The answer generator gets the question as asked, not the retrieval keywords in front of it.
    assert second.answer_question == "Is it treatable?"
    assert second.inputs["ambiguous"] is True
    assert second.inputs["query_performance"] == pytest.approx(IDF[2])
    assert second.inputs["topic_keywords"][0] == {
        "word": "throat",
        "term": "throat",
        "importance": pytest.approx(IDF[1]),
        "qid": "1_1",
    }

    # Turn 3: "symptoms" (idf 2.128) <= eta: ambiguous; m = 1: subtopics of turn 2 only ("treatable").
    third = hqe.rewrite(history[:2], turns[2])
    assert third.query == "throat treatable What are the symptoms of the disease?"
    assert [k["word"] for k in third.inputs["subtopic_keywords"]] == ["treatable"]

    # "lung" (df 1, idf 2.639) > eta: the utterance stands alone, only topic keywords are added.
    specific = hqe.rewrite(history[:2], turn(3, "Tell me about lung surgery."))
    assert specific.query == "throat Tell me about lung surgery."
    assert specific.inputs["ambiguous"] is False and specific.inputs["subtopic_keywords"] == []


def test_hqe_rejects_inverted_thresholds(fixture_index):
    resources = Resources({"index": str(fixture_index)})
    with pytest.raises(ConfigError, match="r_sub <= r_topic"):
        build_stage(
            "rewriter", {"name": "hqe", "r_topic": 1.0, "r_sub": 2.0, "keyword_filter": "none"}, resources
        )


def test_hqe_adds_salient_keywords_of_the_previous_response(fixture_index):
    resources = Resources({"index": str(fixture_index), "stemmer": "krovetz", "cache_dir": None})
    settings = {
        "r_topic": 2.5,
        "r_sub": 1.0,
        "eta": 2.2,
        "m": 1,
        "keyword_filter": "stopwords",
        "importance": "index",
    }
    hqe = build_stage("rewriter", {"name": "hqe", **settings, "response_keywords": 1}, resources)
    first = Turn(
        qid="1_1", topic_id="1", turn_id="1", utterance=CONVERSATION[0], response="Lung lung cancer."
    )
    # "lung": 2 x 2.639 beats "cancer" (1.340, and already a subtopic keyword).
    second = hqe.rewrite([PastTurn(turn=first, query=first.utterance)], turn(2, CONVERSATION[1]))
    assert second.query == "throat cancer lung Is it treatable?"
    assert [k["word"] for k in second.inputs["response_keywords"]] == ["lung"]


def test_hqe_without_its_spacy_model_names_the_setting(fixture_index):
    resources = Resources({"index": str(fixture_index)})
    with pytest.raises(ModelUnavailableError) as error:
        build_stage("rewriter", {"name": "hqe", "spacy_model": "no_such_spacy_model"}, resources)
    assert "no_such_spacy_model" in str(error.value) and "--set rewriter.spacy_model=" in str(error.value)


def test_a_small_index_reads_a_words_importance_from_its_english_frequency(fixture_index):
    from cast.rewrite.vocabulary import IndexVocabulary, bm25_idf, english_idf

    resources = Resources({"index": str(fixture_index), "stemmer": "krovetz", "cache_dir": None})
    small = IndexVocabulary(resources)  # auto: fewer passages than SMALL_COLLECTION
    assert small.importance == "english"
    assert small.term_of("throat") == ("throat", pytest.approx(english_idf("throat")))
    assert small.term_of("Throats") == ("throat", pytest.approx(english_idf("throats")))
    assert (
        small.term_of("zebra") is None
    )  # no passage holds it: no importance, whatever its English frequency
    as_indexed = IndexVocabulary(resources, "index")
    assert as_indexed.term_of("throat") == ("throat", pytest.approx(bm25_idf(1, as_indexed.n_docs)))
    hqe = build_stage("rewriter", {"name": "hqe", "keyword_filter": "stopwords"}, resources)
    assert hqe.vocabulary.importance == "english"
