"""HQE: the pure pieces on hand-computed numbers (the expansion on a fixture index:
test_rewrite_hqe_index.py)."""

from __future__ import annotations

import math

import pytest

from cast.errors import ConfigError
from cast.rewrite.hqe import (
    Keyword,
    expansion_keywords,
    query_performance,
    salient_keywords,
    split_keywords,
)
from cast.rewrite.vocabulary import ENGLISH_IDF, bm25_idf, idf_of_zipf


def kw(word: str, importance: float, qid: str = "1_1") -> Keyword:
    return Keyword(word=word, term=word, importance=importance, qid=qid)


def test_bm25_idf_matches_lucene():
    assert bm25_idf(1, 20) == pytest.approx(math.log(14))
    assert bm25_idf(10, 20) == pytest.approx(math.log(2))


def test_english_idf_is_linear_between_its_knots_and_level_beyond_them():
    assert idf_of_zipf(4.0) == pytest.approx(6.48)  # a knot
    assert idf_of_zipf(4.25) == pytest.approx((6.48 + 5.58) / 2)  # halfway to the next
    assert idf_of_zipf(0.0) == pytest.approx(12.7)  # a word wordfreq does not know
    assert idf_of_zipf(7.7) == pytest.approx(2.38)  # "the": the last knot's
    idfs = [idf for _, idf in ENGLISH_IDF]
    assert idfs == sorted(idfs, reverse=True)  # a more frequent word is never rarer


def test_split_keywords_by_thresholds():
    words = [kw("a", 3.0), kw("b", 2.0), kw("c", 1.0), kw("d", 0.5)]
    topic, sub = split_keywords(words, r_topic=2.5, r_sub=1.0)
    assert [k.word for k in topic] == ["a"]
    assert [k.word for k in sub] == ["b", "c"]
    with pytest.raises(ConfigError):
        split_keywords(words, r_topic=1.0, r_sub=2.0)


def test_query_performance_is_the_best_word_importance():
    assert query_performance([kw("a", 1.5), kw("b", 2.5)]) == 2.5
    assert query_performance([]) == 0.0


def test_expansion_adds_topic_of_all_turns_and_subtopic_of_last_m_once_each():
    history = [([kw("throat", 3.0)], [kw("cancer", 2.0)]), ([kw("throat", 3.0)], [kw("treat", 2.0)])]
    topic, sub = expansion_keywords(history, current_terms={"symptom"}, ambiguous=True, m=1)
    assert [k.word for k in topic] == ["throat"] and [k.word for k in sub] == ["treat"]
    topic, sub = expansion_keywords(history, current_terms={"throat"}, ambiguous=True, m=5)
    assert topic == [] and [k.word for k in sub] == ["cancer", "treat"]
    _, sub = expansion_keywords(history, current_terms=set(), ambiguous=False, m=5)
    assert sub == []


def test_salient_keywords_rank_by_count_times_importance():
    words = [kw("a", 2.0), kw("b", 3.0), kw("a", 2.0), kw("c", 0.5), kw("d", 3.0)]
    assert [k.word for k in salient_keywords(words, 2, min_importance=1.0)] == [
        "a",
        "b",
    ]  # 4.0, 3.0 (b first)
    assert [k.word for k in salient_keywords(words, 5, min_importance=1.0)] == ["a", "b", "d"]
