"""Verification of generated answers: every claim checked against the passage it cites.

An answer is split into claims (its attributed sentences, else :func:`cast.infra.text.split_sentences`), and each
claim is scored against the passage it cites (a sentence that cites none, or a generator that does not say, such
as seq2seq, against each selected passage, keeping the best; an attributed answer's sentence that cited none is
then attributed to that passage). Claims whose support is below ``threshold`` are dropped (or kept and
marked), and the answer is withheld, replaced by :data:`ABSTENTION_TEXT`, where no claim is supported or where
even the best selected passage is too far from the question (``min_relevance``): a grounded "I could not find
it" is worth more than a fluent answer from passages about something else.

Support, offline (no ``model``), in [0, 1]: a logistic function of four overlaps of claim and passage,

    support = 1 / (1 + exp(-(WORDS * words + CONTENT * content + NAMES * names + MISSING * missing + BIAS)))

with the weights of :data:`SUPPORT_WEIGHTS`, where

* words: the share of the claim's words that occur in the passage;
* content: the share of the claim's content words (stop words out, a plural ``s`` off) in the passage;
* names: the share of the claim's names and numbers (capitalised inside the sentence, or with a digit) that
  the passage contains (1 where it has none);
* missing: the number of the claim's words the passage lacks (a count, not a share: one new word in a long
  sentence still adds something the passage does not say).

The weights are fitted (logistic regression, each sentence labelled by its response) on the BEGIN dev split: human
attribution labels for knowledge-grounded dialogue responses from three sources (WoW, CMU-DoG, Topical-Chat). Fitted
on two sources and tested on the third, the lowest support over a response's sentences separates "fully
attributable" responses with an AUC of 0.976 / 0.936 / 0.962 (CMU-DoG / Topical-Chat / WoW), above the best simple
score on each held-out source (the share of the response's words found in the knowledge: 0.969 / 0.928 / 0.944),
in under a millisecond a response (``bench/begin.py``; bench/RESULTS.md, "Verifying answers and chat-model
stages").

With ``model``, a local NLI cross-encoder (e.g. ``cross-encoder/nli-deberta-v3-small``) reads (passage, claim)
and the support is its probability of entailment.

Relevance, for abstention: the highest cosine between the question's and a selected passage's embeddings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, ClaimSupport, Selection, Verification
from cast.core.stages import Verifier
from cast.errors import ConfigError
from cast.infra.models import AllowDownload
from cast.infra.resources import Resources
from cast.infra.text import WORD_JOINERS, passage_text, sentences, word_tokens
from cast.rank.rerank import CrossEncoderReranker
from cast.summarize.entity_extractive import STOPWORDS

ABSTENTION_TEXT = "I could not find an answer to that in the collection."
UNSUPPORTED = ("drop", "mark")
# The offline support's weights (module docstring): words, content words, names, missing words, and the intercept.
SUPPORT_WEIGHTS = (2.13, 2.68, 0.49, -0.44, -3.39)


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


def offline_support(parts: Sequence[float], weights: Sequence[float] = SUPPORT_WEIGHTS) -> float:
    """The offline support of a claim by a passage, in [0, 1], from its :func:`lexical_parts` (the module
    docstring's formula)."""
    *slopes, intercept = weights
    return 1.0 / (1.0 + math.exp(-(sum(w * x for w, x in zip(slopes, parts, strict=True)) + intercept)))


@dataclass(frozen=True)
class PassageEvidence:
    """What the offline support reads of a passage: its (lower-cased) words and content words."""

    words: set[str]
    content: set[str]

    @classmethod
    def of(cls, text: str) -> PassageEvidence:
        return cls(set(tokens(text)), content_words(text))


def lexical_parts(claim: str, evidence: PassageEvidence) -> tuple[float, float, float, float]:
    """The claim's word, content-word and name shares found in the passage, and the count of its words the
    passage lacks."""
    claim_words = tokens(claim)
    return (
        share_found(claim_words, evidence.words, 0.0),
        share_found(content_words(claim), evidence.content, 0.0),
        share_found(names_and_numbers(claim), evidence.words, 1.0),
        float(sum(w not in evidence.words for w in claim_words)),
    )


class ClaimVerifier(Verifier):
    """Checks each answer sentence against the passage it cites; drops or marks unsupported ones, or abstains.

    It abstains where nothing is supported or the passages are far from the question (see the module docstring).
    """

    name = "claims"

    class Settings(Verifier.Settings):
        threshold: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description=(
                    "a claim is supported when its support reaches this value (0.35: near the offline support's "
                    'most accurate cut for "fully attributable" on BEGIN dev, 0.33; 0.32-0.41 when chosen on two '
                    "of its three sources)."
                ),
            ),
        ] = 0.35
        min_relevance: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description=(
                    "abstain when the best selected passage's relevance to the question (cosine of MiniLM "
                    "embeddings) is below this value (0: never for that reason)."
                ),
            ),
        ] = 0.0
        unsupported: Annotated[
            Literal["drop", "mark"],
            Field(
                description=(
                    "``drop`` the unsupported claims from the answer, or ``mark`` them (kept in the answer, "
                    "recorded as unsupported, shown so in the explorer)."
                )
            ),
        ] = "drop"
        model: Annotated[
            str | None,
            Field(
                description=(
                    "``null``: the offline support (word, content-word and name overlap, words the passage lacks); or a"
                    " local NLI cross-encoder folder (or cached Hugging Face id), whose entailment probability is"
                    " the support."
                )
            ),
        ] = None
        entailment_label: Annotated[
            int | None,
            Field(
                description=(
                    'with ``model``, the output index of "entailment" (``null``: read from the model\'s '
                    "``id2label``)."
                )
            ),
        ] = None
        max_length: Annotated[
            int, Field(description="with ``model``, (passage, claim) pairs are cut to this many tokens.")
        ] = 512
        allow_download: AllowDownload = False

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        if resources is None:
            raise ConfigError("verifier claims needs the pipeline's resources (build it from a config)")
        # Loaded at start-up, so that a missing model stops the run before any turn.
        self.encoder = resources.sentence_encoder(None, 256)
        self.cache = resources.cache
        self.entailment: Any = None
        if settings.model is not None:
            scorer = CrossEncoderReranker(
                resources,
                **{
                    "model": settings.model,
                    "max_length": settings.max_length,
                    "with_title": False,
                    "allow_download": settings.allow_download,
                },
            )
            label = (
                settings.entailment_label
                if settings.entailment_label is not None
                else entailment_index(scorer.model.config)
            )
            self.entailment = scorer.with_settings(relevant_label=label)

    def described_extras(self) -> dict[str, Any]:
        extras: dict[str, Any] = {"encoder": self.encoder.model_id}
        if self.entailment is not None:
            extras["entailment_label"] = self.entailment.setting_values.relevant_label
        return extras

    @property
    def verifier_name(self) -> str:
        model = self.setting_values.model
        return f"{self.name}:{model}" if model else self.name

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
        supported = [support >= self.setting_values.threshold for _, support in scored]
        reason = None
        if not texts:
            reason = "no selected passage has text"
        elif relevance is not None and relevance < self.setting_values.min_relevance:
            reason = f"the best passage's relevance {relevance:.3f} is below min_relevance {self.setting_values.min_relevance}"
        elif not any(supported):
            reason = f"no claim of the answer reaches support {self.setting_values.threshold}"
        keep = [reason is None and (ok or self.setting_values.unsupported == "mark") for ok in supported]
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
        # A sentence that cites no selected passage is attributed to the one that supports it best.
        attributed = [
            claim if claim.passage_id in texts else replace(claim, passage_id=pid)
            for claim, (pid, _) in zip(claims, scored, strict=True)
        ]
        if reason is not None:
            withheld = Answer(
                ABSTENTION_TEXT,
                answer.source_ids,
                answer.generator,
                settings=answer.settings,
                no_answer_reason=f"verifier: {reason}",
            )
            return withheld, verification
        if not answer.sentences:  # a generator that attributes nothing: its text, checked, as it is
            if all(keep):
                return answer, verification
            attributed = claims
        kept = tuple(claim for claim, k in zip(attributed, keep, strict=True) if k)
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
        return [offline_support(lexical_parts(claim, PassageEvidence.of(passage))) for passage in passages]

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
