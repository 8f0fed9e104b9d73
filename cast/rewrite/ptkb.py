"""PTKB statement selection (TREC iKAT): which of the user's personal statements matter at this turn.

Selectors (config section ``ptkb``, by ``name``):

* ``none``: no statement (the default where a config has no ``ptkb`` section; CAsT topics have no PTKB).
* ``all``: every statement, in file order.
* ``bm25``: BM25 over the conversation's statements (idf from its own PTKB), the utterance as the query.
* ``biencoder``: cosine of MiniLM embeddings (the bundled all-MiniLM-L6-v2, or ``model``) with the utterance.
* ``cross_encoder``: a local sequence-pair checkpoint reading (utterance, statement), e.g. the
  ``cross-encoder/ms-marco-MiniLM-L-6-v2`` the iKAT 2023 organisers' baseline used; scores are probabilities.

Every selector but ``none`` and ``all`` scores the utterance and, with weight ``context_weight``, the earlier
utterances of the conversation (``context_turns`` of them): a statement about the conversation's subject stays
relevant when the user says "Which one is cheaper?". The chosen statements are the best ``k`` whose score
reaches ``threshold``; every statement's score is recorded (``ptkb_provenance`` in the answers and iKAT run
files), so that the ranking can be evaluated (``cast eval ptkb``).

``rewrite: append`` (the organisers' baseline) puts the chosen statements after the rewritten query for
retrieval; ``rewrite: context`` gives them to the rewriter as context instead, as if the user had just said them
(the T5 rewriter reads them as the latest earlier turn, the one its input keeps longest; HQE takes keywords from
them); ``answer: true`` gives them to the answer generator too, in front of the question.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.records import PastTurn, PTKBSelection, PTKBStatement, Rewrite, Turn
from cast.core.stages import PTKBSelector
from cast.errors import ConfigError
from cast.infra.models import AllowDownload
from cast.infra.resources import Resources
from cast.rank.rerank import CrossEncoderReranker

# How many statements may be chosen (a selector choosing every statement changes its default).
StatementCount = Annotated[int, Field(description="at most this many statements are chosen.")]
# The turn id of the statements given to a rewriter as context (``rewrite: context``): rewriters that tell the
# user's statements apart from the conversation (the LLM rewriter) look for it.
STATEMENTS_TURN_ID = "ptkb"
_WORD = re.compile(r"\w+")


class StatementSelector(PTKBSelector):
    """Chooses the PTKB statements that matter at a turn by their scores (see the module docstring)."""

    class Settings(PTKBSelector.Settings):
        k: StatementCount = 3
        threshold: Annotated[
            float | None,
            Field(description="statements scoring below it are not chosen (``None``: no minimum)."),
        ] = None
        context_turns: Annotated[
            int, Field(description="how many earlier utterances of the conversation form the context.")
        ] = 3
        context_weight: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="the weight of the context's score, the utterance's being ``1 - context_weight``.",
            ),
        ] = 0.0
        rewrite: Annotated[
            Literal["append", "context", "none"],
            Field(
                description=(
                    "``append`` the chosen statements to the query for retrieval, give them to the rewriter as "
                    "``context``, or ``none``."
                )
            ),
        ] = "append"
        answer: Annotated[
            bool,
            Field(
                description="give the chosen statements to the answer generator, in front of the question."
            ),
        ] = False

    setting_values: Settings

    def select(
        self, statements: Sequence[PTKBStatement], history: Sequence[PastTurn], turn: Turn
    ) -> PTKBSelection:
        """The chosen statements, best first (ties in file order), and every statement's score."""
        if not statements:
            return PTKBSelection(statements=(), scores={}, method=self.name)
        texts = [s.text for s in statements]
        scores = self.scores(turn.utterance, texts)
        context = " ".join(
            past.turn.utterance
            for past in history[-self.setting_values.context_turns :]
            if self.setting_values.context_turns
        )
        if self.setting_values.context_weight and context:
            context_scores = self.scores(context, texts)
            scores = [
                (1 - self.setting_values.context_weight) * own + self.setting_values.context_weight * around
                for own, around in zip(scores, context_scores, strict=True)
            ]
        order = sorted(range(len(statements)), key=lambda i: (-scores[i], i))
        chosen = [
            i
            for i in order
            if self.setting_values.threshold is None or scores[i] >= self.setting_values.threshold
        ][: self.setting_values.k]
        return PTKBSelection(
            statements=tuple(statements[i] for i in chosen),
            scores={s.id: float(score) for s, score in zip(statements, scores, strict=True)},
            method=self.name,
        )

    def scores(self, query: str, statements: Sequence[str]) -> list[float]:
        """The relevance of each statement to ``query`` (higher is better)."""
        raise NotImplementedError

    def rewriter_history(
        self, history: Sequence[PastTurn], turn: Turn, selection: PTKBSelection
    ) -> Sequence[PastTurn]:
        """The history the rewriter sees: with ``rewrite: context``, the chosen statements come last, as an
        earlier turn of the user's."""
        if self.setting_values.rewrite != "context" or not selection.statements:
            return history
        said = " ".join(s.text for s in selection.statements)
        statements = Turn(
            qid=f"{turn.topic_id}_{STATEMENTS_TURN_ID}",
            topic_id=turn.topic_id,
            turn_id=STATEMENTS_TURN_ID,
            utterance=said,
        )
        return [*history, PastTurn(turn=statements, query=said)]

    def personalise(self, rewrite: Rewrite, selection: PTKBSelection) -> Rewrite:
        """``rewrite`` with the chosen statements used as configured (``rewrite``, ``answer``)."""
        if not selection.statements:
            return rewrite
        personal = " ".join(s.text for s in selection.statements)
        query = f"{rewrite.query} {personal}" if self.setting_values.rewrite == "append" else rewrite.query
        question = (
            f"{personal} {rewrite.answer_question}" if self.setting_values.answer else rewrite.answer_question
        )
        # Later turns' rewriters read this turn's query without the statements (see TurnResult.past_turn).
        inputs = {
            **rewrite.inputs,
            "ptkb": [s.id for s in selection.statements],
            "rewritten_query": rewrite.query,
        }
        return Rewrite(query=query, method=rewrite.method, inputs=inputs, question=question)


class NoPTKB(StatementSelector):
    """Chooses no statement."""

    name = "none"
    selects = False

    def select(
        self, statements: Sequence[PTKBStatement], history: Sequence[PastTurn], turn: Turn
    ) -> PTKBSelection:
        return PTKBSelection(statements=(), scores={}, method=self.name or "none")


class AllPTKB(StatementSelector):
    """Chooses every statement (``k`` and ``threshold`` still apply)."""

    name = "all"

    class Settings(StatementSelector.Settings):
        k: StatementCount = 1000

    setting_values: Settings

    def scores(self, query: str, statements: Sequence[str]) -> list[float]:
        return [1.0] * len(statements)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_scores(query: str, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of ``query`` over ``documents``, idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` within them.

    Example:
        >>> [round(s, 3) for s in bm25_scores("peanuts", ["I am allergic to peanuts.", "I live here."])]
        [0.629, 0.0]
    """
    bags = [Counter(words(d)) for d in documents]
    average = sum(sum(bag.values()) for bag in bags) / len(bags) if bags else 0.0
    df = Counter(term for bag in bags for term in bag)
    scores = []
    for bag in bags:
        length = sum(bag.values())
        score = 0.0
        for term in set(words(query)):
            tf = bag.get(term, 0)
            if tf:
                idf = math.log(1.0 + (len(bags) - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / (average or 1.0)))
        scores.append(score)
    return scores


class BM25PTKB(StatementSelector):
    """Lexical selection: BM25 over the conversation's statements."""

    name = "bm25"

    class Settings(StatementSelector.Settings):
        k1: Annotated[float, Field(description="term-frequency saturation.")] = 1.2
        b: Annotated[float, Field(description="length normalisation.")] = 0.75

    setting_values: Settings

    def scores(self, query: str, statements: Sequence[str]) -> list[float]:
        return bm25_scores(query, statements, self.setting_values.k1, self.setting_values.b)


class BiEncoderPTKB(StatementSelector):
    """Cosine of sentence embeddings, kept in the shared cache."""

    name = "biencoder"

    class Settings(StatementSelector.Settings):
        model: Annotated[
            str | None,
            Field(description="a sentence-transformers model folder; default the bundled all-MiniLM-L6-v2."),
        ] = None
        max_seq_length: Annotated[int, Field(description="texts are truncated to this many tokens.")] = 128

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        self.encoder = resources.sentence_encoder(settings.model, settings.max_seq_length)
        self.cache = resources.cache

    def described_extras(self) -> dict[str, Any]:
        return {"model": self.encoder.model_id}

    def scores(self, query: str, statements: Sequence[str]) -> list[float]:
        vectors = self.encoder.cached_embeddings([query, *statements], self.cache)
        return [float(v) for v in vectors[1:] @ vectors[0]]


class CrossEncoderPTKB(StatementSelector):
    """A sequence-pair classifier reads (utterance, statement); scores are probabilities of relevance."""

    name = "cross_encoder"

    class Settings(StatementSelector.Settings):
        model: Annotated[
            str | None,
            Field(
                description="a local cross-encoder folder (or a cached Hugging Face id), e.g. ms-marco-MiniLM-L-6-v2."
            ),
        ] = None
        max_length: Annotated[int, Field(description="pairs are truncated to this many tokens.")] = 256
        allow_download: AllowDownload = False

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        if settings.model is None:
            raise ConfigError("ptkb cross_encoder needs `model`: a cross-encoder folder or Hugging Face id")
        self.scorer = CrossEncoderReranker(
            resources,
            **{
                "model": settings.model,
                "max_length": settings.max_length,
                "with_title": False,
                "allow_download": settings.allow_download,
            },
        )

    def scores(self, query: str, statements: Sequence[str]) -> list[float]:
        return self.scorer.score_pairs([(query, s) for s in statements])
