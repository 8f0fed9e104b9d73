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
import re
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, Selection
from cast.core.stages import Summarizer
from cast.errors import ConfigError
from cast.infra.readable import announces_what_follows, is_cut, opens_with_reference, readable_sentence
from cast.infra.resources import Resources
from cast.infra.text import (
    WORD_JOINERS,
    SentenceSpan,
    count_words,
    entity_label,
    repeats_pairs,
    sentences,
    split_sentences,
    word_pairs,
    word_tokens,
)
from cast.infra.wellformed import FormReader
from cast.summarize import no_answer
from cast.summarize.question import (
    KINDS,
    PARENTHESES,
    Kind,
    answer_kind,
    antecedent,
    entity_genders,
    fits_kind,
    natural_question,
    opening_gender,
)

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
        follows: it comes right after the candidate before it in its passage, with nothing dropped between (so
            that a sentence opening on a reference to that one reads after it).
        refers_back: it leans on what came before it in its passage ("She ...", "The book ..."; with a reader,
            as the reader reads openers: "The scandal led to ..."): it is added to an answer only right after that
            sentence, and opens one after it, or alone where only the reader reads it as leaning
            (:meth:`SentencePicker.pick`).
    """

    text: str
    passage_id: str
    order: tuple[float, int]
    terms: frozenset[str]
    entities: frozenset[str]
    words: int
    follows: bool = False
    refers_back: bool = False

    @cached_property
    def announces(self) -> bool:
        """It announces what the sentence after it in its passage says ("Here are some tips ..."): it reads only
        right before that sentence (:func:`announces_what_follows`)."""
        return announces_what_follows(self.text)


def content_terms(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` without stop words."""
    return [t for t in (w.lower() for w in word_tokens(text, split_at=WORD_JOINERS)) if t not in STOPWORDS]


@lru_cache(maxsize=65536)
def word_stem(word: str) -> str:
    """``word``'s Porter stem, without a possessive "'s": "died" and "die", "Curie's" and "Curie" match."""
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer().stem(re.sub(r"['’]s$", "", word))


def word_stems(terms: Iterable[str]) -> frozenset[str]:
    """The stems of ``terms`` (:func:`word_stem`)."""
    return frozenset(word_stem(t) for t in terms)


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
LeadSentences = Annotated[
    int,
    Field(
        ge=0,
        description="open the answer with a featured snippet: the best sentence and the sentences around it in its "
        "passage that it needs (the one before, where it opens on a reference) or that are relevant too, up to "
        "this many (0: no lead, the sentences in passage order).",
    ),
]
AddShare = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        description="after the lead, add a sentence only where its relevance reaches this share of the lead "
        "sentence's (0: fill the budget).",
    ),
]
Wellformed = Annotated[
    bool,
    Field(
        description="cut a heading or a label glued to a sentence off and leave out what a reader would still not "
        "call a sentence (a quotation that is none, no verb: cast/infra/wellformed.py, a spaCy tagger). Which "
        "sentences lean on what came before them stays the opener rule's (cast/infra/readable.py): the tagger's "
        "wider reading of it cost answers their answering sentence (judged: bench/results-history.md).",
    ),
]
# A sentence whose content words overlap this much with a sentence of an earlier answer repeats it.
REPEATED_OVERLAP = 0.8


@dataclass(frozen=True)
class SentencePicker:
    """How an extractive answer is put together from the selected passages' sentences (see :meth:`pick`).

    Attributes:
        words: the word budget (a ceiling).
        entity_weight: the share of entity coverage (vs query relevance) in a sentence's score.
        novelty_weight: how much overlap with the sentences already picked counts against a sentence.
        min_sentence_words: shorter sentences are not considered, unless there is nothing else.
        position_weight: the share of the position prior (lead sentences of the best passages) in the score.
        fill: complete the budget with the start of the best sentence that does not fit whole.
        lead_sentences: the longest span of consecutive sentences of one passage that opens the answer, built
            around the best sentence (0: no lead; every sentence in passage order).
        add_share: after the lead, a sentence is added only where its relevance reaches this share of the lead
            sentence's.
        reader: where given, tells the headings and labels glued to sentences (cut off), what a reader would not
            call sentences (left out) and the sentences that lean on what came before them
            (:mod:`cast.infra.wellformed`); otherwise a referring opener says so.
    """

    words: int
    entity_weight: float
    novelty_weight: float
    min_sentence_words: int
    position_weight: float
    fill: bool
    lead_sentences: int = 0
    add_share: float = 0.0
    reader: FormReader | None = None

    def candidates(self, selection: Selection) -> list[Candidate]:
        """The distinct sentences of the selected passages that read as sentences and are not questions (whole, without page boilerplate: :func:`statements`;
        with a ``reader``, cut down to the parts it reads as sentences), with their terms and entities.

        Sentences shorter than ``min_sentence_words`` are left out, unless there is nothing else; where nothing
        reads as a sentence, the passages' sentences as they are.
        """
        for min_words in (self.min_sentence_words, 1):
            found = self._read(selection, _sentences(selection, min_words), min_words)
            if found:
                return found
        return _sentences(selection, 1, keep=lambda sentence: sentence)

    def _read(self, selection: Selection, candidates: list[Candidate], min_words: int) -> list[Candidate]:
        """``candidates`` as the reader reads them: each cut down to what reads as a sentence (a heading or a
        label glued in front cut off, :meth:`FormReader.repair`; none left under ``min_words`` words), each
        marked where it leans on what came before it as the reader reads openers, as the form check reads answers
        (:attr:`cast.infra.wellformed.SentenceForm.refers_back`: "The scandal led to ...", "In my mind, though,
        ..."); a part left in lower case (the rest of a sentence whose label was cut off) is none."""
        if self.reader is None or not candidates:
            return candidates
        passages = {scored.id: scored.passage.text for scored in selection.passages}
        mentions = selection.explanation.get("passage_entities", {})
        read: dict[str, Candidate] = {}
        kept_to_end = False  # the candidate before was kept to its end (so that the next one may follow it)
        for candidate, found in zip(
            candidates, self.reader.repair_and_read([c.text for c in candidates]), strict=True
        ):
            part, form = found or ((0, 0), None)
            text = candidate.text[part[0] : part[1]]
            key, words = " ".join(text.lower().split()), count_words(text)
            if form is None or key in read or words < min_words or is_cut(text):
                kept_to_end = False
                continue
            entities = candidate.entities
            if text != candidate.text:
                passage = passages[candidate.passage_id]
                at = passage.find(text)
                # A part whose marks were dropped from it is not found verbatim: it keeps its sentence's entities.
                if at >= 0:
                    entities = sentence_entities(
                        passage, at, at + len(text), mentions.get(candidate.passage_id, ())
                    )
            read[key] = replace(
                candidate,
                text=text,
                terms=frozenset(content_terms(text)),
                entities=entities,
                words=words,
                # nothing cut between it and the candidate before
                follows=candidate.follows and kept_to_end and part[0] == 0,
                refers_back=form.refers_back,
            )
            kept_to_end = part[1] == len(candidate.text)
        return list(read.values())

    def pick(
        self,
        candidates: Sequence[Candidate],
        ranks: Mapping[str, float],
        relevance: Sequence[float],
    ) -> list[Candidate]:
        """The answer's sentences in reading order (never none), given each candidate's relevance to the question.

        With ``lead_sentences``, the answer opens with a featured snippet: the most relevant sentence, with the
        sentences before it in its passage it refers to ("She ...", "The book ..."; one that only the ``reader``
        reads as leaning back, "The scandal led to ...", after the sentence before it where that one is a
        candidate leaning on nothing, and alone otherwise), the sentence after it where it announces that one
        ("Here are some tips ..."), and the sentences after it that are relevant too, up to ``lead_sentences`` from
        it on. Then sentences of any passage are added greedily (maximal marginal relevance) while they fit, are
        relevant enough (``add_share``) and read where they stand: a sentence that leans on what came before it
        comes only right after the sentence before it in its passage, and one that announces what follows it not at
        all. Without a lead, sentences are picked greedily and read in passage order.

        Whole sentences are taken while they fit: the budget is a ceiling (where no sentence fits, the best one is
        the answer, whole). With ``fill``, the best remaining sentence, cut to the words left and marked "…",
        completes the budget (as the top-k trim baseline's answers do), so answers are as long as asked.
        """
        top_rank = max(ranks.values(), default=0.0)
        position = {c.order: i for i, c in enumerate(candidates)}
        picked: list[Candidate] = []
        covered: set[str] = set()
        remaining = list(range(len(candidates)))

        def best_of(indices: list[int]) -> int:
            scores = {
                i: self._score(candidates[i], relevance[i], picked, covered, ranks, top_rank) for i in indices
            }
            return max(indices, key=lambda i: (scores[i], -i))

        def before(i: int) -> int | None:
            rank, index = candidates[i].order
            return position.get((rank, index - 1)) if candidates[i].follows else None

        def after(i: int) -> int | None:
            rank, index = candidates[i].order
            following = position.get((rank, index + 1))
            return following if following is not None and candidates[following].follows else None

        def reads_here(i: int) -> bool:
            # A sentence that announces what follows it opens a lead or nothing; one that leans on what came before
            # reads only after the sentence before it in its passage.
            if candidates[i].announces:
                return False
            if not candidates[i].refers_back:
                return True
            previous = before(i)
            return previous is not None and candidates[previous] in picked

        lead: list[int] = []
        if self.lead_sentences > 0:
            lead = self._lead(candidates, relevance, before, after)
            for i in lead:
                picked.append(candidates[i])
                covered |= candidates[i].entities
                remaining.remove(i)
            floor = self.add_share * max(relevance[i] for i in lead)
            remaining = [i for i in remaining if relevance[i] >= floor and relevance[i] > 0]
        budget = self.words - sum(c.words for c in picked)
        while remaining and budget > 0:
            fitting = [i for i in remaining if candidates[i].words <= budget and reads_here(i)]
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
        return reading_order(picked[: len(lead)], picked[len(lead) :])

    def _lead(
        self,
        candidates: Sequence[Candidate],
        relevance: Sequence[float],
        before: Callable[[int], int | None],
        after: Callable[[int], int | None],
    ) -> list[int]:
        """The featured snippet that opens the answer: indices of consecutive sentences of one passage, the first
        of which opens on no reference and the last of which announces nothing."""
        longest = max(self.lead_sentences, 2)

        def reading_span(i: int) -> list[int] | None:
            # The sentence with the sentences before it that it refers to, back to one that refers to none, and
            # the sentences after it that say what it announces.
            span = [i]
            if candidates[i].refers_back and not opens_with_reference(candidates[i].text):
                # Only the tagger reads it as leaning back ("The scandal led to ..."): it reads after the sentence
                # before it where that one is there and leans on nothing, and alone otherwise.
                previous = before(i)
                if (
                    previous is not None
                    and not candidates[previous].refers_back
                    and candidates[previous].words + candidates[i].words <= self.words
                ):
                    span.insert(0, previous)
            else:
                while candidates[span[0]].refers_back:
                    previous = before(span[0])
                    if previous is None or len(span) >= longest:
                        return None
                    span.insert(0, previous)
            while candidates[span[-1]].announces:
                following = after(span[-1])
                if following is None or len(span) >= longest:
                    return None
                span.append(following)
            return span if sum(candidates[k].words for k in span) <= self.words else None

        starts = {i: reading_span(i) for i in range(len(candidates))}
        usable = [i for i, span in starts.items() if span is not None]
        # The sentence that answers best, by its relevance alone: the position prior and the entities' coverage
        # choose what follows it.
        best = max(usable or range(len(candidates)), key=lambda i: (relevance[i], -i))
        span = starts[best] or [best]
        words = sum(candidates[i].words for i in span)
        # Up to lead_sentences from the best one on: a sentence read before it for what it leans on is not one.
        while len(span) - span.index(best) < self.lead_sentences:
            following = after(span[-1])
            if (
                following is None
                or candidates[following].announces
                or words + candidates[following].words > self.words
                or relevance[following] < self.add_share * relevance[best]
            ):
                break
            span.append(following)
            words += candidates[following].words
        return span

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


def reading_order(lead: Sequence[Candidate], rest: Sequence[Candidate]) -> list[Candidate]:
    """The lead first, then the other sentences in passage order, each sentence that follows another of the
    answer in its passage kept right after it (a sentence opening on a reference reads after its antecedent)."""
    ordered = [*lead, *sorted(rest, key=lambda c: c.order)]
    placed: list[Candidate] = []
    for candidate in ordered:
        if candidate in placed:
            continue
        placed.append(candidate)
        rank, index = candidate.order
        successor = next((c for c in ordered if c.order == (rank, index + 1) and c.follows), None)
        while successor is not None and successor not in placed and successor not in lead:
            placed.append(successor)
            rank, index = successor.order
            successor = next((c for c in ordered if c.order == (rank, index + 1) and c.follows), None)
    return placed


def already_said(candidate: Candidate, said: Sequence[frozenset[str]]) -> bool:
    """Whether an earlier answer of the conversation gave this sentence (or one with nearly its words)."""
    return any(overlap(candidate.terms, terms) >= REPEATED_OVERLAP for terms in said)


class SentenceExtractiveSummarizer(Summarizer):
    """Answers made of the selected passages' sentences, each attributed to its passage: the sentences a
    :attr:`picker` picks by their :meth:`relevance` to the question, none that an earlier answer of the
    conversation gave."""

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

    def in_context(
        self, question: str, selection: Selection, candidates: Sequence[Candidate]
    ) -> tuple[str, list[Candidate]]:
        """The question the candidates are matched to, and the candidates as they read in answer to it: both as
        they are, unless the generator resolves the question in its conversation."""
        return question, list(candidates)

    def summarize(self, query: str, selection: Selection, earlier: Sequence[str] = ()) -> Answer:
        source_ids = tuple(p.id for p in selection.passages)
        picker = self.picker
        candidates = picker.candidates(selection)
        if not candidates:
            return no_answer(self, source_ids)
        said = [frozenset(content_terms(s)) for answer in earlier for s in sentences(answer)]
        # Nothing an earlier answer said: neither its sentences' words nor most of its word pairs (the same
        # page template on another page), which the reader would take for the same answer again.
        earlier_pairs = [word_pairs(answer) for answer in earlier]
        candidates = [
            c
            for c in candidates
            if not already_said(c, said) and not repeats_pairs(word_pairs(c.text), earlier_pairs)
        ]
        if not candidates:
            return no_answer(
                self, source_ids, "every sentence of the selected passages was in an earlier answer"
            )
        question, candidates = self.in_context(query, selection, candidates)
        picked = picker.pick(
            candidates, entity_ranks(selection), self.relevance(question, selection, candidates)
        )
        answer_sentences = tuple(AnswerSentence(c.text, c.passage_id) for c in picked)
        return Answer(
            text=" ".join(s.text for s in answer_sentences),
            source_ids=source_ids,
            generator=self.name,
            sentences=answer_sentences,
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
        lead_sentences: LeadSentences = 0
        add_share: AddShare = 0.0
        kind_weight: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="the share, in a sentence's relevance, of fitting the kind of answer the question asks "
                "for (a definition, a cause, a procedure, a yes or no, a quantity, a date, a list; "
                "summarize/question.py), in [0, 1].",
            ),
        ] = 0.0
        kinds: Annotated[
            list[Kind],
            Field(
                description="the kinds of question whose answers ``kind_weight`` favours (default all of them).",
            ),
        ] = list(KINDS)
        resolve_question: Annotated[
            bool,
            Field(
                description="match sentences to the question with its first third-person pronoun replaced by the "
                "entity it refers to (the best-ranked entity of the queries whose gender, by the passages' "
                'pronouns, agrees with it: "he" after a turn about Marie Curie is her husband; '
                "summarize/question.py), not to the utterance as said; and a sentence that opens on a pronoun of "
                'that entity, in a passage that names no other of its gender, reads on its own ("She named ..." '
                'answers "Which elements did she discover?").'
            ),
        ] = False
        title_words: Annotated[
            bool,
            Field(
                description="a sentence holds the words of its page's topic, for the word overlap with the question: "
                'an encyclopedia page\'s sentences are about its title ("the element" in the page "Polonium" is '
                "polonium); a web page's headline names no topic (:func:`page_topic`)."
            ),
        ] = False
        wellformed: Wellformed = False
        relevance: Annotated[
            Literal["overlap", "dense", "hybrid"],
            Field(
                description="how a sentence matches the question: ``overlap`` (idf-weighted shared words), "
                "``dense`` (cosine of sentence embeddings; needs ``resources``, embeddings kept in the shared "
                "cache) or ``hybrid`` (their mean)."
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
        dense = settings.relevance != "overlap"
        if dense and resources is None:
            raise ConfigError(
                f"summarizer.relevance: {settings.relevance} needs the pipeline's resources (build it from a config)"
            )
        # Loaded at start-up, so that a missing model stops the run before any turn.
        self.encoder = (
            resources.sentence_encoder(settings.model, settings.max_seq_length)
            if dense and resources
            else None
        )
        self.cache = resources.cache if self.encoder is not None and resources else None
        self.reader = FormReader() if settings.wellformed else None

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
            lead_sentences=settings.lead_sentences,
            add_share=settings.add_share,
            reader=self.reader,
        )

    def described_extras(self) -> dict[str, Any]:
        return {"model": self.encoder.model_id} if self.encoder is not None else {}

    def relevance(self, question: str, selection: Selection, candidates: Sequence[Candidate]) -> list[float]:
        settings = self.setting_values
        topics = (
            {p.id: page_topic(p.passage.title) for p in selection.passages} if settings.title_words else {}
        )
        match = self.query_match(question, candidates, topics)
        if settings.kind_weight == 0:
            return match
        kind = answer_kind(question)
        if kind not in settings.kinds:
            return match
        return [
            (1.0 - settings.kind_weight) * m + settings.kind_weight * float(fits_kind(kind, c.text))
            for m, c in zip(match, candidates, strict=True)
        ]

    def in_context(
        self, question: str, selection: Selection, candidates: Sequence[Candidate]
    ) -> tuple[str, list[Candidate]]:
        if not self.setting_values.resolve_question:
            return question, list(candidates)
        referent = question_referent(question, selection)
        named = entity_label(referent.entity) if referent.entity else None
        return natural_question(question, named), read_for_referent(referent, selection, candidates)

    def query_match(
        self, query: str, candidates: Sequence[Candidate], topics: Mapping[str, str] | None = None
    ) -> list[float]:
        """Each candidate's match with the query, in [0, 1], per the ``relevance`` setting; ``topics``: the topic
        of each candidate's page (by passage id, :func:`page_topic`), whose words count as the candidate's for the
        word overlap."""
        overlaps: list[float] = []
        if self.setting_values.relevance != "dense":
            query_terms = list(word_stems(content_terms(query)))
            topics = topics or {}
            stems = [word_stems([*c.terms, *content_terms(topics.get(c.passage_id, ""))]) for c in candidates]
            idf = smoothed_idf(stems)
            overlaps = [query_relevance(query_terms, terms, idf) for terms in stems]
        if self.encoder is None:
            return overlaps
        vectors = self.encoder.cached_embeddings([query, *(c.text for c in candidates)], self.cache)
        cosines = dense_relevance(vectors[0], vectors[1:])
        if not overlaps:
            return cosines
        return [(a + b) / 2 for a, b in zip(overlaps, cosines, strict=True)]


# A page's headline ("The Best Strength Exercises for Runners | Strength Running", "What is COP26? - CBBC"), not a topic.
_HEADLINE = re.compile(r"[|:?!]| [-–—] ")


def page_topic(title: str | None) -> str:
    """What a page is about, as its title names it: an encyclopedia's title without its disambiguation ("Paul Kelly
    (Australian musician)" -> "Paul Kelly"); nothing for a web page's headline or a title of more than five words."""
    topic = PARENTHESES.sub("", title or "").strip()
    return "" if _HEADLINE.search(topic) or len(topic.split()) > 5 else topic


def position_prior(passage_rank: float, sentence_index: int) -> float:
    """``1 / ((1 + passage_rank) * (1 + sentence_index))``: the lead sentence of the best passage scores 1."""
    return 1.0 / ((1 + passage_rank) * (1 + sentence_index))


class Referent(NamedTuple):
    """What the question's first pronoun refers to, as the selected passages tell it.

    Attributes:
        entity: the entity the pronoun refers to, or ``None``.
        genders: the gender the passages' pronouns give each entity (:func:`cast.summarize.question.entity_genders`).
        offsets: each selected passage's entities with where they start in its text.
    """

    entity: str | None
    genders: dict[str, str]
    offsets: dict[str, list[tuple[int, str]]]


def question_referent(question: str, selection: Selection) -> Referent:
    """What the question's first pronoun refers to (:func:`cast.summarize.question.antecedent`): among the entities
    of the conversation's queries and then the others of the turn, best-ranked first, one whose gender (by the
    selected passages' pronouns) agrees; the selection's focus entity where nothing is ranked. A passage's entities
    are its linked mentions and where the queried entities' names occur in it."""
    ranks = entity_ranks(selection)
    ranked = sorted(ranks, key=lambda e: (-ranks[e], e))
    queried = [e for e in ranked if e in set(selection.explanation.get("query_entities", ()))]
    mentions = selection.explanation.get("passage_entities", {})
    offsets = {
        p.id: [
            *mention_offsets(p.passage.text, mentions.get(p.id, ())),
            *name_offsets(p.passage.text, queried),
        ]
        for p in selection.passages
    }
    genders = entity_genders([(p.passage.text, offsets[p.id]) for p in selection.passages])
    return Referent(antecedent(question, queried or ranked[:1], ranked, genders), genders, offsets)


def read_for_referent(
    referent: Referent, selection: Selection, candidates: Sequence[Candidate]
) -> list[Candidate]:
    """``candidates`` with those that open on a pronoun of the question's referent marked as reading on their own:
    in answer to "Which elements did she discover?", "She named the first element she discovered polonium ..."
    has its antecedent in the question. Only where the sentence's passage names the referent and no other name
    among the conversation's queried entities of its gender, so that the pronoun is not read as someone else."""
    gender = referent.genders.get(referent.entity) if referent.entity else None
    if gender is None:
        return list(candidates)
    # Only a name can be "she": a concept the pronoun rule of thumb gave a gender ("Chemical element") rivals none.
    rivals = {
        e
        for e in selection.explanation.get("query_entities", ())
        if referent.genders.get(e) == gender and all(w[:1].isupper() for w in entity_label(e).split())
    } - {referent.entity}
    named = {passage_id: {e for _, e in found} for passage_id, found in referent.offsets.items()}
    about_referent = {
        passage_id
        for passage_id, entities in named.items()
        if referent.entity in entities and not rivals & entities
    }
    return [
        replace(c, refers_back=False)
        if c.refers_back and c.passage_id in about_referent and opening_gender(c.text) == gender
        else c
        for c in candidates
    ]


def name_offsets(passage_text: str, entities: Sequence[str]) -> list[tuple[int, str]]:
    """Where the entities are named in ``passage_text`` by the last word of their name ("Curie died in 1934"),
    linked there or not: a person's surname names them in the passages about them."""
    found = []
    for entity in entities:
        last = (entity_label(entity).split() or [""])[-1]
        if len(last) > 2 and last[0].isupper():
            found += [(m.start(), entity) for m in re.finditer(rf"\b{re.escape(last)}\b", passage_text)]
    return found


def mention_offsets(passage_text: str, mentions: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    """Where each mention starts in ``passage_text`` and its entity: at its offsets where they point at its
    surface form (:func:`placed_at`), else where the surface form first occurs (mentions found nowhere are left
    out)."""
    found = []
    for mention in mentions:
        start = placed_at(passage_text, mention)
        if start is None and mention.get("surface"):
            start = passage_text.find(mention["surface"])
        if start is not None and start >= 0:
            found.append((start, mention["entity"]))
    return found


def placed_at(passage_text: str, mention: Mapping[str, Any]) -> int | None:
    """The mention's start offset where its offsets point at its surface form in ``passage_text`` (else they refer
    to another version of the text: ``None``)."""
    surface, start, end = mention.get("surface", ""), mention.get("start"), mention.get("end")
    if isinstance(start, int) and isinstance(end, int) and passage_text[start:end] == surface:
        return start
    return None


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
        surface, m_start = mention.get("surface", ""), placed_at(passage_text, mention)
        if m_start is not None:
            if start <= m_start and m_start + len(surface) <= end:
                found.add(mention["entity"])
        elif surface and surface.lower() in lowered:
            found.add(mention["entity"])
    return frozenset(found)


def statements(span: SentenceSpan) -> SentenceSpan | None:
    """What of a passage's sentence an answer may use: what reads as a sentence
    (:func:`cast.infra.readable.readable_sentence`), unless it is a question (a page's "What can we expect from
    COP26?" answers nothing)."""
    kept = readable_sentence(span)
    return None if kept is None or kept.text.rstrip("\"')”’").endswith("?") else kept


def _without_title(sentence: SentenceSpan, title: str | None) -> SentenceSpan:
    """A passage's first sentence without the page title glued in front of it ("Paris Agreement The Paris
    Agreement is ...", as KILT's Wikipedia passages start)."""
    if not title or not sentence.text.startswith(title + " "):
        return sentence
    rest = sentence.text[len(title) + 1 :]
    if not rest[:1].isupper():
        return sentence
    return SentenceSpan(rest, sentence.start + len(title) + 1, sentence.end)


def _sentences(
    selection: Selection,
    min_words: int,
    keep: Callable[[SentenceSpan], SentenceSpan | None] = statements,
) -> list[Candidate]:
    mentions = selection.explanation.get("passage_entities", {})
    found: dict[str, Candidate] = {}
    for rank, scored in enumerate(selection.passages):
        text = scored.passage.text
        passage_mentions = mentions.get(scored.id, ())
        index, last = 0, -2  # the candidate's number in its passage; the passage's sentence it was
        for number, sentence in enumerate(split_sentences(text)):
            span = keep(_without_title(sentence, scored.passage.title) if number == 0 else sentence)
            if span is None:
                continue
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
                # nothing dropped between: not a sentence before, nor the start of this one (a heading, a byline)
                follows=number == last + 1 and span.start == sentence.start,
                refers_back=opens_with_reference(span.text),
            )
            index, last = index + 1, number
    return list(found.values())
