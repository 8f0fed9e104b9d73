"""Verification of generated answers: every claim checked against the passage it cites.

An answer is split into claims (its attributed sentences, else :func:`cast.text.split_sentences`), and each
claim is scored against the passage it cites (a generator that does not say, such as seq2seq, against each
selected passage, keeping the best). Claims whose support is below ``threshold`` are dropped (or kept and
marked), and the answer is withheld, replaced by :data:`ABSTENTION_TEXT`, where no claim is supported or where
even the best selected passage is too far from the question (``min_relevance``): a grounded "I could not find
it" is worth more than a fluent answer from passages about something else.

Support, offline (no ``model``), in [0, 1]:

    support = (0.2 * dense + 0.4 * words + 0.4 * content) * (0.5 + 0.5 * names)

* dense: the highest cosine between the claim's and the passage sentences' MiniLM embeddings (negative as 0);
* words: the share of the claim's words that occur in the passage;
* content: the share of the claim's content words (stop words out, a plural ``s`` off) in the passage;
* names: the share of the claim's names and numbers (capitalised inside the sentence, or with a digit) that
  the passage contains (1 where it has none): a name or a figure the passage lacks halves the support.

The weights are round values, not fitted; on the BEGIN dev split (human attribution labels for knowledge-grounded
dialogue responses) this support, as the lowest over a response's sentences, separates "fully attributable"
responses with an AUC of 0.94, and ``threshold`` 0.75 does so with an accuracy of 0.90 (``bench/begin.py``;
bench/RESULTS.md, "Verifying answers and chat-model stages").

With ``model``, a local NLI cross-encoder (e.g. ``cross-encoder/nli-deberta-v3-small``) reads (passage, claim)
and the support is its probability of entailment.

Relevance, for abstention: the highest cosine between the question's and a selected passage's embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

from cast.errors import ConfigError
from cast.records import Answer, AnswerSentence, ClaimSupport, Selection, Verification
from cast.settings import OneOf, Range, Runtime
from cast.stages import Verifier
from cast.text import WORD_JOINERS, passage_text, sentences, word_tokens
from summarize.entity_extractive import STOPWORDS

if TYPE_CHECKING:
    from cast.resources import Resources

ABSTENTION_TEXT = "I could not find an answer to that in the collection."
UNSUPPORTED = ("drop", "mark")
# The offline support's weights (module docstring): dense, words, content words.
DENSE_WEIGHT, WORD_WEIGHT, CONTENT_WEIGHT = 0.2, 0.4, 0.4


class NoVerifier(Verifier):
    """Checks nothing: the generated answer is given as it is (the default)."""

    name = "none"

    def verify(
        self, question: str, selection: Selection, answer: Answer
    ) -> tuple[Answer, Verification | None]:
        return answer, None


# --- the offline support score's parts (pure functions) ----------------------------------------------------


def tokens(text: str) -> list[str]:
    """Lower-cased runs of letters and digits (``"Curie's"`` -> ``curie``, ``s``)."""
    return [token.lower() for token in word_tokens(text, split_at=WORD_JOINERS)]


def content_words(text: str) -> set[str]:
    """Lower-cased content words of ``text``: stop words out, a plural ``s`` off (``passages`` -> ``passage``)."""
    found = set()
    for token in tokens(text):
        if token in STOPWORDS:
            continue
        found.add(
            token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token
        )
    return found


def names_and_numbers(sentence: str) -> set[str]:
    """The lower-cased words of a sentence that name something: capitalised after its first word, or with a
    digit (``"In 1911 Marie Curie won"`` -> ``{"1911", "marie", "curie"}``)."""
    found = set()
    for position, token in enumerate(word_tokens(sentence, split_at=WORD_JOINERS)):
        if any(c.isdigit() for c in token) or (position > 0 and token[:1].isupper()):
            found.add(token.lower())
    return found


def share_found(wanted: Sequence[str] | set[str], available: set[str], empty: float) -> float:
    """The share of ``wanted`` in ``available`` (``empty`` where nothing is wanted)."""
    wanted = list(wanted)
    return sum(w in available for w in wanted) / len(wanted) if wanted else empty


def offline_support(dense: float, word_share: float, content_share: float, name_share: float) -> float:
    """The offline support of a claim by a passage, in [0, 1] (the module docstring's formula)."""
    overlap = DENSE_WEIGHT * max(dense, 0.0) + WORD_WEIGHT * word_share + CONTENT_WEIGHT * content_share
    return min(1.0, overlap * (0.5 + 0.5 * name_share))


@dataclass(frozen=True)
class PassageEvidence:
    """What the offline support reads of a passage: its (lower-cased) words and content words."""

    words: set[str]
    content: set[str]

    @classmethod
    def of(cls, text: str) -> PassageEvidence:
        return cls(set(tokens(text)), content_words(text))


def lexical_parts(claim: str, evidence: PassageEvidence) -> tuple[float, float, float]:
    """The claim's word, content-word and name shares found in the passage."""
    return (
        share_found(tokens(claim), evidence.words, 0.0),
        share_found(content_words(claim), evidence.content, 0.0),
        share_found(names_and_numbers(claim), evidence.words, 1.0),
    )


class ClaimVerifier(Verifier):
    """Checks each answer sentence against the passage it cites; drops or marks unsupported ones, or abstains.

    It abstains where nothing is supported or the passages are far from the question (see the module docstring).

    Args:
        threshold: a claim is supported when its support reaches this value (0.75: the offline support's most
            accurate cut for "fully attributable" on BEGIN dev, 0.71-0.82 when chosen on two of its three sources).
        min_relevance: abstain when the best selected passage's relevance to the question (cosine of MiniLM
            embeddings) is below this value (0: never for that reason).
        unsupported: ``drop`` the unsupported claims from the answer, or ``mark`` them (kept in the answer,
            recorded as unsupported, shown so in the explorer).
        model: ``null``: the offline support (MiniLM embeddings, word, content-word and name overlap); or a local
            NLI cross-encoder folder (or cached Hugging Face id), whose entailment probability is the support.
        entailment_label: with ``model``, the output index of "entailment" (``null``: read from the model's
            ``id2label``).
        max_length: with ``model``, (passage, claim) pairs are cut to this many tokens.
        allow_download: with ``model``, let Hugging Face download it if it is not cached (off: runs are offline).
    """

    name = "claims"

    def __init__(
        self,
        threshold: Annotated[float, Range(0, 1)] = 0.75,
        min_relevance: Annotated[float, Range(0, 1)] = 0.0,
        unsupported: Annotated[str, OneOf(*UNSUPPORTED)] = "drop",
        model: str | None = None,
        entailment_label: int | None = None,
        max_length: int = 512,
        allow_download: Annotated[bool, Runtime()] = False,
        resources: Resources | None = None,
    ):
        if resources is None:
            raise ConfigError("verifier claims needs the pipeline's resources (build it from a config)")
        self.threshold = threshold
        self.min_relevance = min_relevance
        self.unsupported = unsupported
        self.model_name = model
        # Loaded at start-up, so that a missing model stops the run before any turn.
        self.encoder = resources.sentence_encoder(None, 256)
        self.cache = resources.cache
        self.entailment: Any = None
        if model is not None:
            from cast.rank.rerank import CrossEncoderReranker

            scorer = CrossEncoderReranker(
                resources, model=model, max_length=max_length, with_title=False, allow_download=allow_download
            )
            label = (
                entailment_label if entailment_label is not None else entailment_index(scorer.model.config)
            )
            scorer.relevant_label = label
            self.entailment = scorer

    def described_extras(self) -> dict[str, Any]:
        extras: dict[str, Any] = {"encoder": self.encoder.model_id}
        if self.entailment is not None:
            extras["entailment_label"] = self.entailment.relevant_label
        return extras

    @property
    def verifier_name(self) -> str:
        return f"{self.name}:{self.model_name}" if self.model_name else self.name

    def verify(
        self, question: str, selection: Selection, answer: Answer
    ) -> tuple[Answer, Verification | None]:
        return self.verify_batch([(question, selection, answer)])[0]

    def verify_batch(
        self, items: Sequence[tuple[str, Selection, Answer]]
    ) -> list[tuple[Answer, Verification | None]]:
        return [self._verify(question, selection, answer) for question, selection, answer in items]

    def _verify(
        self, question: str, selection: Selection, answer: Answer
    ) -> tuple[Answer, Verification | None]:
        if answer.no_answer_reason is not None:
            return answer, None  # nothing was generated: nothing to check
        # The title is part of the evidence: "She won it twice" in a passage titled "Marie Curie".
        texts = {p.id: passage_text(p.passage, True) for p in selection.passages if p.passage.text.strip()}
        claims = list(answer.sentences) or [AnswerSentence(s, None) for s in sentences(answer.text)]
        relevance = self.relevance(question, list(texts.values())) if texts else None
        scored = [self.score_claim(claim, texts) for claim in claims]
        supported = [support >= self.threshold for _, support in scored]
        reason = None
        if not texts:
            reason = "no selected passage has text"
        elif relevance is not None and relevance < self.min_relevance:
            reason = (
                f"the best passage's relevance {relevance:.3f} is below min_relevance {self.min_relevance}"
            )
        elif not any(supported):
            reason = f"no claim of the answer reaches support {self.threshold}"
        keep = [reason is None and (ok or self.unsupported == "mark") for ok in supported]
        verification = Verification(
            verifier=self.verifier_name,
            claims=tuple(
                ClaimSupport(claim.text, pid, round(support, 4), ok, kept)
                for claim, (pid, support), ok, kept in zip(claims, scored, supported, keep, strict=True)
            ),
            relevance=None if relevance is None else round(relevance, 4),
            abstained=reason is not None,
            reason=reason,
            original_text=answer.text,
        )
        if reason is not None:
            withheld = Answer(
                ABSTENTION_TEXT,
                answer.source_ids,
                answer.generator,
                settings=answer.settings,
                no_answer_reason=f"verifier: {reason}",
            )
            return withheld, verification
        if all(keep):
            return answer, verification
        kept = tuple(claim for claim, k in zip(claims, keep, strict=True) if k)
        return replace(answer, text=" ".join(c.text for c in kept), sentences=kept), verification

    def score_claim(self, claim: AnswerSentence, passages: dict[str, str]) -> tuple[str | None, float]:
        """The passage a claim is scored against and its support: the cited passage, else (no citation, or a
        citation of a passage not selected) the selected passage that supports it best."""
        if not passages:
            return None, 0.0
        candidates = [claim.passage_id] if claim.passage_id in passages else list(passages)
        supports = self.support(claim.text, [passages[pid] for pid in candidates])
        best = max(range(len(candidates)), key=lambda i: (supports[i], -i))
        return candidates[best], supports[best]

    def support(self, claim: str, passages: Sequence[str]) -> list[float]:
        """The support of ``claim`` by each of ``passages``, in [0, 1]."""
        if self.entailment is not None:
            return self.entailment.score_pairs([(passage, claim) for passage in passages])
        passage_sentences = [sentences(p) or [p] for p in passages]
        flat = [s for group in passage_sentences for s in group]
        vectors = self.encoder.cached_embeddings([claim, *flat], self.cache)
        cosines = vectors[1:] @ vectors[0]
        supports, start = [], 0
        for passage, group in zip(passages, passage_sentences, strict=True):
            dense = float(cosines[start : start + len(group)].max())
            start += len(group)
            supports.append(offline_support(dense, *lexical_parts(claim, PassageEvidence.of(passage))))
        return supports

    def relevance(self, question: str, passages: Sequence[str]) -> float:
        """The best passage's relevance to the question: the highest cosine of their embeddings."""
        vectors = self.encoder.cached_embeddings([question, *passages], self.cache)
        return max(0.0, float((vectors[1:] @ vectors[0]).max()))


def entailment_index(config: Any) -> int:
    """The output index of "entailment" in an NLI model's ``id2label``.

    Raises:
        ConfigError: no label reads as entailment (set ``verifier.entailment_label``).
    """
    labels = {int(i): str(label).lower() for i, label in (getattr(config, "id2label", None) or {}).items()}
    for index, label in labels.items():
        if label.startswith("entail"):
            return index
    raise ConfigError(
        f"verifier.model has no output labelled entailment (its labels: {labels or 'none'}); set "
        "verifier.entailment_label to the index of its entailment output"
    )
