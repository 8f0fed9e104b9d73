"""The offline generator: an extractive, entity-aware summary of the selected passages.

Sentences of the chosen passages are picked greedily, maximal-marginal-relevance style; each pick maximises

    (1 - novelty_weight) * relevance - novelty_weight * (highest word overlap with the sentences already picked)
    relevance = (1 - position_weight) * [(1 - entity_weight) * query match + entity_weight * new entities]
                + position_weight * position prior

where the query match is, with ``relevance: overlap``, the idf-weighted share of the query's content words in the
sentence or, with ``relevance: dense`` (the offline profile's), the cosine of the query's and the sentence's
sentence-transformers embeddings (negative cosines count as 0), which credits a sentence that answers in other
words ("how tall" / "330 metres high"); "new entities" is the rank mass of the sentence's entities that no picked
sentence mentions yet (relative to the top-ranked entity), and the position prior favours the first sentences of
the best passages (news-style lead sentences). Whole sentences are added while they fit in the word budget, a ceiling
(``fill`` completes it with the best remaining sentence cut and marked with "…", as answers were once written);
the answer lists the sentences in passage order, each attributed to its passage.

Entities come from the selection stage: ``selection.explanation["entity_ranks"]`` (``{entity: rank score}``)
and ``selection.explanation["passage_entities"]`` (``{passage id: [{"surface", "start", "end", "entity"}]}``,
offsets into the passage text as the selection gives it).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, Selection
from cast.core.resources import Resources
from cast.core.stages import Summarizer
from cast.errors import ConfigError
from cast.infra.readable import readable_sentences
from cast.infra.text import WORD_JOINERS, SentenceSpan, count_words, split_sentences, word_tokens
from cast.summarize import no_answer

# Function words carry no topical evidence for relevance or redundancy.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves tell know
    """.split()
)


# The reading position of a cut sentence: after every whole one.
LAST = (math.inf, 0)


@dataclass(frozen=True)
class Candidate:
    """A sentence that may go into the answer.

    Attributes:
        text: the sentence.
        passage_id: the passage it comes from.
        order: its position (passage rank, sentence index), for reading order.
        terms: its content words (lower-cased, no stop words).
        entities: the entities mentioned in it.
        words: its length in words.
    """

    text: str
    passage_id: str
    order: tuple[float, int]
    terms: frozenset[str]
    entities: frozenset[str]
    words: int


def content_terms(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` without stop words."""
    return [t for t in (w.lower() for w in word_tokens(text, split_at=WORD_JOINERS)) if t not in STOPWORDS]


def query_relevance(
    query_terms: Sequence[str], sentence_terms: frozenset[str], idf: Mapping[str, float]
) -> float:
    """The idf-weighted share of the query's distinct content terms that the sentence contains, in [0, 1]."""
    distinct = set(query_terms)
    total = sum(idf.get(t, 0.0) for t in distinct)
    if total == 0.0:
        return 0.0
    return sum(idf.get(t, 0.0) for t in distinct & sentence_terms) / total


def dense_relevance(query_vector: Any, sentence_vectors: Any) -> list[float]:
    """The cosine of unit-length query and sentence embeddings, negative values as 0 (a sentence about something
    else is no relevance, not a penalty): on the [0, 1] scale of :func:`query_relevance`."""
    return [max(0.0, float(cosine)) for cosine in sentence_vectors @ query_vector]


def entity_gain(entities: frozenset[str], covered: set[str], ranks: Mapping[str, float]) -> float:
    """The rank mass of the sentence's entities that no picked sentence covers yet (diminishing returns)."""
    return sum(ranks.get(e, 0.0) for e in entities - covered)


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two term sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def smoothed_idf(documents: Sequence[frozenset[str]]) -> dict[str, float]:
    """``log(1 + N / df)`` over the candidate sentences: rarer terms weigh more, every term weighs > 0."""
    df: dict[str, int] = {}
    for terms in documents:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    n = len(documents)
    return {t: math.log(1.0 + n / d) for t, d in df.items()}


# Settings the extractive generators share.
Words = Annotated[int, Field(ge=1, description="the word budget of the answer.")]
NoveltyWeight = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        description="how much overlap with the sentences already picked counts against a sentence (the "
        "maximal-marginal-relevance trade-off), in [0, 1].",
    ),
]
MinSentenceWords = Annotated[
    int, Field(description="sentences shorter than this are not considered (headings, fragments).")
]
Fill = Annotated[
    bool,
    Field(description="complete the budget with the start of the best sentence that does not fit whole."),
]


@dataclass(frozen=True)
class SentencePicker:
    """How an extractive answer is put together from the selected passages' sentences: a greedy
    maximal-marginal-relevance choice within the word budget (see :meth:`pick`).

    Attributes:
        words: the word budget.
        entity_weight: the share of entity coverage (vs query relevance) in a sentence's score.
        novelty_weight: how much overlap with the sentences already picked counts against a sentence.
        min_sentence_words: shorter sentences are not considered, unless there is nothing else.
        position_weight: the share of the position prior (lead sentences of the best passages) in the score.
        fill: complete the budget with the start of the best sentence that does not fit whole.
    """

    words: int
    entity_weight: float
    novelty_weight: float
    min_sentence_words: int
    position_weight: float
    fill: bool

    def candidates(self, selection: Selection) -> list[Candidate]:
        """The distinct sentences of the selected passages that read as sentences (whole, without page
        boilerplate: :func:`cast.infra.readable.readable_sentences`), with their terms and entities.

        Sentences shorter than ``min_sentence_words`` are left out, unless there is nothing else; where nothing
        reads as a sentence, the passages' sentences as they are.
        """
        return (
            _sentences(selection, self.min_sentence_words)
            or _sentences(selection, 1)
            or _sentences(selection, 1, split=split_sentences)
        )

    def pick(
        self,
        candidates: Sequence[Candidate],
        ranks: Mapping[str, float],
        relevance: Sequence[float],
    ) -> list[Candidate]:
        """Greedy maximal-marginal-relevance choice of sentences within the word budget (never empty), given
        each candidate's relevance to the question.

        Whole sentences are taken while they fit: the budget is a ceiling (where no sentence fits, the best one is
        the answer, whole). With ``fill``, the best remaining sentence, cut to the words left and marked "…",
        completes the budget (as the top-k trim baseline's answers do), so answers are as long as asked.
        """
        top_rank = max(ranks.values(), default=0.0)
        picked: list[Candidate] = []
        covered: set[str] = set()
        budget = self.words
        remaining = list(range(len(candidates)))

        def best_of(indices: list[int]) -> int:
            scores = {
                i: self._score(candidates[i], relevance[i], picked, covered, ranks, top_rank) for i in indices
            }
            return max(indices, key=lambda i: (scores[i], -i))

        while remaining and budget > 0:
            fitting = [i for i in remaining if candidates[i].words <= budget]
            if not fitting:
                if self.fill:
                    last = candidates[best_of(remaining)]
                    # A cut sentence reads as one only at the end of the answer, marked as cut.
                    cut = " ".join(last.text.split()[:budget]) + "…"
                    picked.append(Candidate(cut, last.passage_id, LAST, last.terms, last.entities, budget))
                elif not picked:  # no sentence fits: the best one, whole, rather than none or a cut one
                    picked.append(candidates[best_of(remaining)])
                break
            best = best_of(fitting)
            picked.append(candidates[best])
            covered |= candidates[best].entities
            budget -= candidates[best].words
            remaining.remove(best)
        return picked

    def _score(
        self,
        candidate: Candidate,
        relevance: float,
        picked: Sequence[Candidate],
        covered: set[str],
        ranks: Mapping[str, float],
        top_rank: float,
    ) -> float:
        coverage = entity_gain(candidate.entities, covered, ranks) / top_rank if top_rank > 0 else 0.0
        # Several entities can add up to more than the top one; cap so that coverage stays on relevance's scale.
        combined = (1.0 - self.entity_weight) * relevance + self.entity_weight * min(coverage, 1.0)
        combined = (1.0 - self.position_weight) * combined + self.position_weight * position_prior(
            *candidate.order
        )
        redundancy = max((overlap(candidate.terms, p.terms) for p in picked), default=0.0)
        return (1.0 - self.novelty_weight) * combined - self.novelty_weight * redundancy


class SentenceExtractiveSummarizer(Summarizer):
    """Answers made of the selected passages' sentences, each attributed to its passage: the sentences a
    :attr:`picker` picks by their :meth:`relevance` to the question."""

    @property
    @abstractmethod
    def picker(self) -> SentencePicker:
        """How the sentences are picked, as the settings say."""

    @abstractmethod
    def relevance(self, question: str, selection: Selection, candidates: Sequence[Candidate]) -> list[float]:
        """Each candidate sentence's relevance to the question (higher is better)."""

    def candidates(self, selection: Selection) -> list[Candidate]:
        """The sentences of the selected passages an answer is made of (:meth:`SentencePicker.candidates`)."""
        return self.picker.candidates(selection)

    def summarize(self, query: str, selection: Selection) -> Answer:
        source_ids = tuple(p.id for p in selection.passages)
        picker = self.picker
        candidates = picker.candidates(selection)
        if not candidates:
            return no_answer(self, source_ids)
        picked = picker.pick(
            candidates, entity_ranks(selection), self.relevance(query, selection, candidates)
        )
        sentences = tuple(AnswerSentence(c.text, c.passage_id) for c in sorted(picked, key=lambda c: c.order))
        return Answer(
            text=" ".join(s.text for s in sentences),
            source_ids=source_ids,
            generator=self.name,
            sentences=sentences,
            settings=self.describe(),
        )


class EntityExtractiveSummarizer(SentenceExtractiveSummarizer):
    """Extractive answers from the selected passages, by query relevance, entity coverage and novelty."""

    name = "entity_extractive"

    class Settings(SentenceExtractiveSummarizer.Settings):
        words: Words = 50
        entity_weight: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="the share of entity coverage (vs query overlap) in a sentence's relevance, in [0, 1].",
            ),
        ] = 0.25
        novelty_weight: NoveltyWeight = 0.1
        min_sentence_words: MinSentenceWords = 4
        position_weight: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="the share of the position prior (lead sentences of the best passages) in relevance.",
            ),
        ] = 0.3
        fill: Fill = False
        relevance: Annotated[
            Literal["overlap", "dense"],
            Field(
                description="how a sentence matches the query: ``overlap`` (idf-weighted shared words) or "
                "``dense`` (cosine of sentence embeddings; needs ``resources``, embeddings kept in the shared "
                "cache)."
            ),
        ] = "overlap"
        model: Annotated[
            str | None,
            Field(
                description="with ``dense``, a sentence-transformers model folder; default the bundled "
                "all-MiniLM-L6-v2 (the same model as the bi-encoder re-ranker's is loaded once)."
            ),
        ] = None
        max_seq_length: Annotated[
            int, Field(description="with ``dense``, texts are truncated to this many tokens.")
        ] = 256

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        if settings.relevance == "dense" and resources is None:
            raise ConfigError(
                "summarizer.relevance: dense needs the pipeline's resources (build it from a config)"
            )
        # Loaded at start-up, so that a missing model stops the run before any turn.
        self.encoder = (
            resources.sentence_encoder(settings.model, settings.max_seq_length)
            if settings.relevance == "dense" and resources
            else None
        )
        self.cache = resources.cache if self.encoder is not None and resources else None

    @property
    def picker(self) -> SentencePicker:
        settings = self.setting_values
        return SentencePicker(
            words=settings.words,
            entity_weight=settings.entity_weight,
            novelty_weight=settings.novelty_weight,
            min_sentence_words=settings.min_sentence_words,
            position_weight=settings.position_weight,
            fill=settings.fill,
        )

    def described_extras(self) -> dict[str, Any]:
        return {"model": self.encoder.model_id} if self.encoder is not None else {}

    def relevance(self, question: str, selection: Selection, candidates: Sequence[Candidate]) -> list[float]:
        return self.query_match(question, candidates)

    def query_match(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        """Each candidate's match with the query, in [0, 1], per the ``relevance`` setting."""
        if self.encoder is None:
            query_terms = content_terms(query)
            idf = smoothed_idf([c.terms for c in candidates])
            return [query_relevance(query_terms, c.terms, idf) for c in candidates]
        vectors = self.encoder.cached_embeddings([query, *(c.text for c in candidates)], self.cache)
        return dense_relevance(vectors[0], vectors[1:])


def position_prior(passage_rank: float, sentence_index: int) -> float:
    """``1 / ((1 + passage_rank) * (1 + sentence_index))``: the lead sentence of the best passage scores 1."""
    return 1.0 / ((1 + passage_rank) * (1 + sentence_index))


def entity_ranks(selection: Selection) -> dict[str, float]:
    """The conversation's entity rank scores from the selection (the focus entity alone when none are given)."""
    ranks = dict(selection.explanation.get("entity_ranks", {}))
    if not ranks and selection.focus_entity:
        ranks[selection.focus_entity] = 1.0
    return ranks


def sentence_entities(
    passage_text: str, start: int, end: int, mentions: Sequence[Mapping[str, Any]]
) -> frozenset[str]:
    """The entities whose mentions fall inside the sentence ``passage_text[start:end]``.

    A mention is placed by its offsets when they point at its surface form in ``passage_text``; otherwise (the
    offsets refer to another version of the text) by finding its surface form in the sentence.
    """
    found = set()
    lowered = passage_text[start:end].lower()
    for mention in mentions:
        surface, m_start, m_end = mention.get("surface", ""), mention.get("start"), mention.get("end")
        if isinstance(m_start, int) and isinstance(m_end, int) and passage_text[m_start:m_end] == surface:
            if start <= m_start and m_end <= end:
                found.add(mention["entity"])
        elif surface and surface.lower() in lowered:
            found.add(mention["entity"])
    return frozenset(found)


def _sentences(
    selection: Selection,
    min_words: int,
    split: Callable[[str], list[SentenceSpan]] = readable_sentences,
) -> list[Candidate]:
    mentions = selection.explanation.get("passage_entities", {})
    found: dict[str, Candidate] = {}
    for rank, scored in enumerate(selection.passages):
        text = scored.passage.text
        passage_mentions = mentions.get(scored.id, ())
        for index, span in enumerate(split(text)):
            key = " ".join(span.text.lower().split())
            words = count_words(span.text)
            if key in found or words < min_words:
                continue
            found[key] = Candidate(
                text=span.text,
                passage_id=scored.id,
                order=(rank, index),
                terms=frozenset(content_terms(span.text)),
                entities=sentence_entities(text, span.start, span.end, passage_mentions),
                words=words,
            )
    return list(found.values())
