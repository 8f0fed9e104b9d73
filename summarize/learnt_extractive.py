"""Extractive answers whose sentences a learnt scorer chooses: ``summarizer: learnt_extractive``.

The hand-weighted generator (:mod:`cast.summarize.entity_extractive`) mixes query overlap, entity coverage and a
position prior with fixed weights. Here a gradient-boosted regression ensemble reads those and more of each
candidate sentence (:func:`sentence_features`: the kind of answer the question asks for, where the sentence stands
in its passage, the passage's selection score and title, the sentence's entities, numbers, causes, definitions,
pronouns at its start, how central it is among the candidates) and predicts how much of the sentence a written
response would contain (its ROUGE-1 precision against the response). Sentences are then picked as the
hand-weighted generator picks them: greedily by score less redundancy with those already picked, in the word
budget, each attributed to its passage.

``cast train sentence-scorer`` trains the bundled model (``summarize/data/sentence-scorer.json``) on the pooled
dev benchmark's turns; ``bench/learnt_extractive.py`` tests it leave-one-topic-out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from cast.core.records import Selection
from cast.infra.text import WORD_JOINERS, word_tokens
from cast.infra.trees import TreeEnsemble, load_tree_model
from cast.summarize.entity_extractive import (
    Candidate,
    Fill,
    MinSentenceWords,
    NoveltyWeight,
    SentenceExtractiveSummarizer,
    SentencePicker,
    Words,
    content_terms,
    entity_ranks,
    query_relevance,
    smoothed_idf,
)
from cast.summarize.question import CAUSE, DEFINITION, DIGIT, LIST, YEAR

BUNDLED_MODEL = Path(__file__).resolve().parent / "data" / "sentence-scorer.json"
RETRAIN = "cast train sentence-scorer"

# The question's words that say what kind of answer it asks for: wh-words anywhere near the start (a question
# may open with a lead-in: "I remember ..., but what was it about?"), auxiliaries and requests as its first word.
QUESTION_TYPES = {
    "what": ("what", "what's", "whats"),
    "who": ("who", "who's", "whom", "whose"),
    "when": ("when",),
    "where": ("where",),
    "why": ("why",),
    "how": ("how",),
    "which": ("which",),
    "yes_no": (
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "will",
        "has",
        "have",
        "had",
        "may",
        "might",
        "must",
        "isn't",
        "aren't",
        "doesn't",
        "don't",
        "didn't",
        "can't",
    ),  # fmt: skip
    "request": (
        "tell",
        "describe",
        "explain",
        "list",
        "give",
        "name",
        "compare",
        "show",
        "define",
        "summarize",
        "summarise",
        "recommend",
        "suggest",
        "help",
        "find",
    ),  # fmt: skip
}
FIRST_WORD_ONLY = ("yes_no", "request")
WH_REACH = 12  # words from the start within which a wh-word counts
LEAD_INS = frozenset(("and", "so", "but", "ok", "okay", "then", "also", "now"))
_QUANTITY = re.compile(r"\bhow (?:many|much|long|old|far|big|tall|high|large|often)\b")
_PRONOUN_START = re.compile(r"^(?:it|he|she|they|this|these|those|that|his|her|its|their|such)\b", re.I)

FEATURES = (
    "question_match",
    "passage_rank",
    "passage_score",
    "sentence_index",
    "first_sentence",
    "relative_position",
    "words",
    "entity_count",
    "entity_mass",
    "query_entity",
    "title_match",
    "centrality",
    "has_digit",
    "has_year",
    "has_cause",
    "is_definition",
    "pronoun_start",
    "has_list",
    *(f"asks_{kind}" for kind in QUESTION_TYPES),
    "asks_quantity",
)


def question_type(question: str) -> dict[str, float]:
    """One-hot flags (``asks_<kind>``) of the kind of answer ``question`` asks for.

    Example:
        >>> flags = question_type("And how many people live there?")
        >>> flags["asks_how"], flags["asks_quantity"], flags["asks_what"], flags["asks_yes_no"]
        (1.0, 1.0, 0.0, 0.0)
    """
    lowered = question.lower()
    tokens = [t for t in word_tokens(lowered, split_at=WORD_JOINERS)]
    while tokens and tokens[0] in LEAD_INS:
        tokens.pop(0)
    flags = {}
    for kind, openers in QUESTION_TYPES.items():
        reach = tokens[: 1 if kind in FIRST_WORD_ONLY else WH_REACH]
        flags[f"asks_{kind}"] = 1.0 if any(t in openers for t in reach) else 0.0
    flags["asks_quantity"] = 1.0 if _QUANTITY.search(lowered) else 0.0
    return flags


def sentence_features(question: str, selection: Selection, candidates: Sequence[Candidate]) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate sentence of the selected passages.

    Args:
        question: the question the answer answers.
        selection: the chosen passages (their order, selection scores and titles; entity ranks and the
            conversation's query entities from its explanation, where the selector gives them).
        candidates: the sentences of those passages (:meth:`EntityExtractiveSummarizer.candidates`).
    """
    question_terms = content_terms(question)
    idf = smoothed_idf([c.terms for c in candidates])
    ranks = entity_ranks(selection)
    top_rank = max(ranks.values(), default=0.0)
    query_entities = frozenset(
        m["entity"]
        for m in selection.explanation.get("query_entities", ())
        if isinstance(m, dict) and "entity" in m
    )
    scores = [selection.scores.get(p.id, p.score) for p in selection.passages]
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    passage_score = {
        p.id: (s - low) / (high - low) if high > low else 1.0
        for p, s in zip(selection.passages, scores, strict=True)
    }
    titles = {
        p.id: frozenset(content_terms(p.passage.title)) if p.passage.title else frozenset()
        for p in selection.passages
    }
    sentences_in = {c.passage_id: 0 for c in candidates}
    for c in candidates:
        sentences_in[c.passage_id] = max(sentences_in[c.passage_id], c.order[1] + 1)
    kinds = question_type(question)
    rows = []
    for c in candidates:
        passage_rank, index = c.order
        others = [o for o in candidates if o is not c]
        title = titles.get(c.passage_id, frozenset())
        row = {
            "question_match": query_relevance(question_terms, c.terms, idf),
            "passage_rank": float(passage_rank),
            "passage_score": passage_score.get(c.passage_id, 0.0),
            "sentence_index": float(index),
            "first_sentence": 1.0 if index == 0 else 0.0,
            "relative_position": index / max(sentences_in[c.passage_id], 1),
            "words": float(c.words),
            "entity_count": float(len(c.entities)),
            "entity_mass": sum(ranks.get(e, 0.0) for e in c.entities) / top_rank if top_rank > 0 else 0.0,
            "query_entity": 1.0 if c.entities & query_entities else 0.0,
            "title_match": len(title & c.terms) / len(title) if title else 0.0,
            # mean Jaccard overlap with the other candidates: what the passages agree on
            "centrality": (
                sum(len(c.terms & o.terms) / max(len(c.terms | o.terms), 1) for o in others) / len(others)
                if others
                else 0.0
            ),
            "has_digit": 1.0 if DIGIT.search(c.text) else 0.0,
            "has_year": 1.0 if YEAR.search(c.text) else 0.0,
            "has_cause": 1.0 if CAUSE.search(c.text.lower()) else 0.0,
            "is_definition": 1.0 if DEFINITION.search(c.text) else 0.0,
            "pronoun_start": 1.0 if _PRONOUN_START.search(c.text) else 0.0,
            "has_list": 1.0 if LIST.search(c.text) else 0.0,
            **kinds,
        }
        rows.append([row[name] for name in FEATURES])
    return np.array(rows, dtype=np.float64).reshape(len(candidates), len(FEATURES))


class SentenceScorer:
    """The trained ensemble: :meth:`scores` of candidate sentences (higher: more of it in a written response)."""

    def __init__(self, ensemble: TreeEnsemble, data: Mapping[str, Any]):
        self.ensemble = ensemble
        self.trained_on = data.get("trained_on", {})

    @classmethod
    def load(cls, path: str | Path) -> SentenceScorer:
        return load_tree_model(path, FEATURES, cls, "sentence scorer model", RETRAIN)

    def scores(self, rows: np.ndarray) -> np.ndarray:
        return self.ensemble.margins(rows)


class LearntExtractiveSummarizer(SentenceExtractiveSummarizer):
    """Extractive answers from the selected passages, sentences chosen by a learnt scorer."""

    name = "learnt_extractive"

    class Settings(SentenceExtractiveSummarizer.Settings):
        words: Words = 50
        novelty_weight: NoveltyWeight = 0.1
        min_sentence_words: MinSentenceWords = 4
        fill: Fill = True
        model: Annotated[
            str | None,
            Field(
                description="a sentence scorer model file (``cast train sentence-scorer``); default the bundled "
                "one."
            ),
        ] = None

    setting_values: Settings

    def __init__(self) -> None:
        model = self.setting_values.model
        self.model_path = Path(model).expanduser() if model else BUNDLED_MODEL
        self.scorer = SentenceScorer.load(self.model_path)

    @property
    def picker(self) -> SentencePicker:
        # The scorer reads entity coverage and position itself: no hand-set weights on top of it.
        settings = self.setting_values
        return SentencePicker(
            words=settings.words,
            entity_weight=0.0,
            novelty_weight=settings.novelty_weight,
            min_sentence_words=settings.min_sentence_words,
            position_weight=0.0,
            fill=settings.fill,
        )

    def described_extras(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.model_path.read_bytes()).hexdigest()[:16]
        return {"scorer": {"file": self.model_path.name, "sha256": digest}}

    def relevance(self, question: str, selection: Selection, candidates: Sequence[Candidate]) -> list[float]:
        return [float(s) for s in self.scorer.scores(sentence_features(question, selection, candidates))]
