"""Answer measures: ROUGE, BLEU, METEOR, length and groundedness, per turn.

Measures (all but ``words`` in percent, 0-100, like the paper's tables):

* ROUGE-1/2/L F1: ``rouge-score`` with Porter stemming and its own tokenizer.
* BLEU-1 and BLEU-4: ``sacrebleu``'s sentence BLEU per turn (13a tokenizer, mixed case, ``exp`` smoothing,
  effective n-gram order); the overall figure is the mean over turns, not corpus BLEU.
* METEOR: ``nltk``'s ``meteor_score`` (exact, Porter-stem and WordNet-synonym matches, alpha 0.9, beta 3,
  gamma 0.5) on lower-cased word tokens (:func:`cast.infra.text.words`); WordNet is read offline (:mod:`cast.evaluate.wordnet`).
* words: the answer's length in word tokens.
* grounded: the share of answer sentences supported by the passages the answer read; a sentence is supported
  when its best unigram-overlap F1 with a passage sentence (:func:`cast.infra.text.split_sentences`) reaches the threshold (0.5 by default), as in
  WikiPath's response groundedness. support: the share of answer tokens found in those passages.
* verified (with a verifier): the share of answer sentences the claims verifier (:mod:`cast.summarize.verify`) finds
  supported by the passage each cites (by its best passage where it cites none); claim_support: their mean
  support, times 100.

References: with ``max`` scoring each measure takes its best value over the turn's references (the usual
multi-reference ROUGE/METEOR convention); with ``concat`` the references are joined into one text.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.core.records import Answer, AnswerSentence, Conversation
from cast.errors import CastError
from cast.evaluate.wordnet import wordnet
from cast.formats.answers import AnswersFile
from cast.index.collections import read_passages
from cast.infra import jvm
from cast.infra.text import sentences, words
from cast.summarize.verify import ClaimVerifier

if TYPE_CHECKING:
    import pandas as pd


TEXT_MEASURES = ("ROUGE-1", "ROUGE-2", "ROUGE-L", "BLEU-1", "BLEU-4", "METEOR")
GROUNDEDNESS_MEASURES = ("grounded", "support")
ANSWER_MEASURES = (*TEXT_MEASURES, "words", *GROUNDEDNESS_MEASURES)
VERIFIER_MEASURES = ("verified", "claim_support")
MULTI_REFERENCE_MODES = ("max", "concat")
DEFAULT_REFERENCE_GRADE = 3
DEFAULT_SUPPORT_THRESHOLD = 0.5

# --- references ------------------------------------------------------------------------------------------------


def response_references(conversations: Iterable[Conversation]) -> dict[str, list[str]]:
    """The organisers' written response of each turn that has one (CAsT 2022), by qid."""
    references: dict[str, list[str]] = {}
    for conversation in conversations:
        for turn in conversation.turns:
            if turn.response and turn.response.strip():
                references.setdefault(turn.qid, [turn.response])
    return references


def relevant_passage_ids(
    qrels: Mapping[str, Mapping[str, int]], min_grade: int = DEFAULT_REFERENCE_GRADE
) -> dict[str, list[str]]:
    """The passages judged ``min_grade`` or higher for each turn (the paper's references: grades 3-4)."""
    found = {
        qid: sorted(docid for docid, grade in judgements.items() if grade >= min_grade)
        for qid, judgements in qrels.items()
    }
    return {qid: ids for qid, ids in found.items() if ids}


def passage_references(
    passage_ids: Mapping[str, Sequence[str]], texts: Mapping[str, str]
) -> tuple[dict[str, list[str]], list[str]]:
    """The texts of each turn's reference passages, and the ids whose text was not found."""
    missing = sorted({pid for ids in passage_ids.values() for pid in ids if pid not in texts})
    references = {qid: [texts[pid] for pid in ids if pid in texts] for qid, ids in passage_ids.items()}
    return {qid: refs for qid, refs in references.items() if refs}, missing


def passages_from_collection(paths: Sequence[str | Path], ids: Iterable[str]) -> dict[str, str]:
    """The texts of the passages ``ids``, streamed from collection files (any format ``cast index`` reads)."""
    from tqdm import tqdm

    wanted = set(ids)
    texts: dict[str, str] = {}
    if not wanted:
        return texts
    with tqdm(desc="reading passages", unit=" passages", mininterval=2, leave=False) as progress:
        for passage in read_passages(list(paths)):
            progress.update()
            if passage.id in wanted:
                texts[passage.id] = passage.text
                if len(texts) == len(wanted):
                    break
    return texts


def passages_from_index(index_dir: str | Path, ids: Iterable[str]) -> dict[str, str]:
    """The texts of the passages ``ids`` stored in a Lucene index built by ``cast index build``."""

    searcher = jvm.searcher(str(index_dir))
    texts: dict[str, str] = {}
    for pid in set(ids):
        document = searcher.doc(pid)
        if document is None:
            continue
        raw = document.raw()
        try:
            texts[pid] = json.loads(raw)["contents"]
        except (json.JSONDecodeError, KeyError, TypeError):
            texts[pid] = raw
    return texts


# --- measures --------------------------------------------------------------------------------------------------


def unigram_f1(candidate: Sequence[str], reference: Sequence[str]) -> float:
    """F1 of the unigram overlap between two token lists (multiset overlap, as in SQuAD/WikiPath F1).

    precision = overlap / |candidate|, recall = overlap / |reference|, F1 = 2PR / (P + R); 0 when nothing overlaps.
    """
    overlap = sum((Counter(candidate) & Counter(reference)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(candidate)
    recall = overlap / len(reference)
    return 2 * precision * recall / (precision + recall)


def groundedness(
    answer_sentences: Sequence[str], passages: Sequence[str], threshold: float = DEFAULT_SUPPORT_THRESHOLD
) -> tuple[float, float]:
    """How far an answer is supported by the passages it was generated from.

    Returns:
        (share of answer sentences whose best unigram F1 against any passage sentence is at least
        ``threshold``, share of answer word tokens that occur in the passages), both in [0, 1].
    """
    passage_sentences = [words(s) for text in passages for s in sentences(text)]
    passage_sentences = [s for s in passage_sentences if s]
    answer_tokens = [words(s) for s in answer_sentences]
    answer_tokens = [s for s in answer_tokens if s]
    if not answer_tokens:
        return 0.0, 0.0
    supported = sum(
        1
        for s in answer_tokens
        if max((unigram_f1(s, p) for p in passage_sentences), default=0.0) >= threshold
    )
    vocabulary = {w for p in passage_sentences for w in p}
    all_tokens = [w for s in answer_tokens for w in s]
    return supported / len(answer_tokens), sum(w in vocabulary for w in all_tokens) / len(all_tokens)


def verified_claims(
    verifier: ClaimVerifier, answer: Answer, passage_texts: Mapping[str, str]
) -> tuple[float, float]:
    """The share of the answer's sentences the verifier finds supported, and their mean support, both x100."""
    sources = {pid: passage_texts[pid] for pid in answer.source_ids if pid in passage_texts}
    claims = list(answer.sentences) or [AnswerSentence(s, None) for s in sentences(answer.text)]
    supports = [verifier.score_claim(claim, sources)[1] for claim in claims]
    if not supports:
        return 0.0, 0.0
    supported = sum(support >= verifier.setting_values.threshold for support in supports)
    return 100 * supported / len(supports), 100 * sum(supports) / len(supports)


class TextScorer:
    """ROUGE, BLEU and METEOR of one answer against its references (see the module docstring)."""

    def __init__(self, multi_reference: str = "max"):
        if multi_reference not in MULTI_REFERENCE_MODES:
            raise CastError(f"unknown multi-reference mode {multi_reference!r}; choose max or concat")
        from nltk.translate.meteor_score import single_meteor_score
        from rouge_score.rouge_scorer import RougeScorer
        from sacrebleu.metrics import BLEU

        self.multi_reference = multi_reference
        self._rouge = RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
        self._bleu = {1: BLEU(max_ngram_order=1, effective_order=True), 4: BLEU(effective_order=True)}
        self._wordnet = wordnet()
        self._meteor = single_meteor_score

    def score(self, answer: str, references: Sequence[str]) -> dict[str, float]:
        """The text measures of ``answer``, in percent."""
        if not references:
            raise ValueError("an answer needs at least one reference")
        if self.multi_reference == "concat":
            references = [" ".join(references)]
        per_reference = [self._score_one(answer, reference) for reference in references]
        return {name: max(scores[name] for scores in per_reference) for name in TEXT_MEASURES}

    def _score_one(self, answer: str, reference: str) -> dict[str, float]:
        rouge = self._rouge.score(reference, answer)
        return {
            "ROUGE-1": 100 * rouge["rouge1"].fmeasure,
            "ROUGE-2": 100 * rouge["rouge2"].fmeasure,
            "ROUGE-L": 100 * rouge["rougeL"].fmeasure,
            "BLEU-1": self._bleu[1].sentence_score(answer, [reference]).score,
            "BLEU-4": self._bleu[4].sentence_score(answer, [reference]).score,
            "METEOR": 100 * self._meteor(words(reference), words(answer), wordnet=self._wordnet),
        }


@dataclass
class AnswerEvaluation:
    """Per-turn answer measures of one system.

    Attributes:
        per_turn: one row per turn with references (index ``qid``), columns from :data:`ANSWER_MEASURES`
            (the groundedness columns only when passage texts were given), then :data:`VERIFIER_MEASURES` when a
            verifier was given.
        unreferenced_turns: answered turns without a reference, left out.
        missing_turns: turns with references the system wrote no record for: scored 0 on every measure.
        no_answer_turns: turns with references whose record gives no answer (``no_answer_reason``): scored 0.
        references: how references were made, for the report (e.g. "CAsT 2022 written responses").
        multi_reference: ``max`` or ``concat``.
    """

    per_turn: pd.DataFrame
    references: str
    multi_reference: str
    unreferenced_turns: list[str] = field(default_factory=list)
    missing_turns: list[str] = field(default_factory=list)
    no_answer_turns: list[str] = field(default_factory=list)
    duplicate_qids: list[str] = field(default_factory=list)
    missing_source_passages: int = 0

    def mean(self) -> pd.Series:
        return self.per_turn.mean()

    def notes(self) -> list[str]:
        mode = "best score over references" if self.multi_reference == "max" else "references concatenated"
        notes = [f"{len(self.per_turn)} turns scored against {self.references} ({mode})"]
        if self.unreferenced_turns:
            notes.append(f"{len(self.unreferenced_turns)} answered turns without a reference excluded")
        unanswered = self.missing_turns + self.no_answer_turns
        if unanswered:
            notes.append(
                f"{len(unanswered)} turns with references unanswered, scored 0 ({len(self.missing_turns)} "
                f"missing from the file, {len(self.no_answer_turns)} with no answer; e.g. {unanswered[0]})"
            )
        if self.duplicate_qids:
            notes.append(f"{len(self.duplicate_qids)} repeated qids in the answers file ignored (first kept)")
        if self.missing_source_passages:
            notes.append(
                f"{self.missing_source_passages} source passages not found: groundedness without them"
            )
        return notes


def evaluate_answers(
    answers: AnswersFile,
    references: Mapping[str, Sequence[str]],
    *,
    scorer: TextScorer,
    references_name: str,
    passage_texts: Mapping[str, str] | None = None,
    support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
    verifier: ClaimVerifier | None = None,
    progress: Callable[[Iterable[Any]], Iterable[Any]] = iter,
) -> AnswerEvaluation:
    """Score every turn that has references; a turn left unanswered scores 0 on every measure.

    A system that skips hard turns must not score better than one that tries them (retrieval scores a turn
    missing from the run 0 too). Unanswered: no record for the turn, or a record with a ``no_answer_reason``
    (its text only says why).

    Args:
        answers: the system's answers.
        references: reference texts by qid.
        scorer: the text scorer (its ``multi_reference`` mode applies).
        references_name: how the references were made, for the report.
        passage_texts: texts of the passages answers read, by id; without them groundedness is not measured.
        support_threshold: the unigram F1 from which an answer sentence counts as supported.
        verifier: scores each answer sentence against the passage it cites (needs ``passage_texts``).
        progress: wraps the turn loop (e.g. ``tqdm``).
    """
    import pandas as pd

    if verifier is not None and passage_texts is None:
        raise CastError("the verifier's measures need the passage texts (give the collection or the index)")
    columns = [c for c in ANSWER_MEASURES if passage_texts is not None or c not in GROUNDEDNESS_MEASURES]
    columns += list(VERIFIER_MEASURES) if verifier is not None else []
    rows: dict[str, dict[str, float]] = {}
    missing_sources: set[str] = set()
    answered = [qid for qid in answers.answers if qid in references]
    missing = [qid for qid in references if qid not in answers.answers]
    no_answer = [qid for qid in answered if answers.answers[qid].no_answer_reason is not None]
    for qid in progress([*answered, *missing]):
        answer = answers.answers.get(qid)
        if answer is None or answer.no_answer_reason is not None:
            rows[qid] = dict.fromkeys(columns, 0.0)
            continue
        row = scorer.score(answer.text, references[qid])
        row["words"] = float(len(words(answer.text)))
        if passage_texts is not None:
            sources = [passage_texts[pid] for pid in answer.source_ids if pid in passage_texts]
            missing_sources.update(pid for pid in answer.source_ids if pid not in passage_texts)
            answer_sentences = [s.text for s in answer.sentences] or sentences(answer.text)
            grounded, support = groundedness(answer_sentences, sources, support_threshold)
            row["grounded"], row["support"] = 100 * grounded, 100 * support
            if verifier is not None:
                row["verified"], row["claim_support"] = verified_claims(verifier, answer, passage_texts)
        rows[qid] = row
    per_turn = pd.DataFrame.from_dict(rows, orient="index", columns=columns).astype(float)
    per_turn.index = per_turn.index.astype(str)
    per_turn.index.name = "qid"
    return AnswerEvaluation(
        per_turn=per_turn,
        references=references_name,
        multi_reference=scorer.multi_reference,
        unreferenced_turns=[qid for qid in answers.answers if qid not in references],
        missing_turns=missing,
        no_answer_turns=no_answer,
        duplicate_qids=answers.duplicate_qids,
        missing_source_passages=len(missing_sources),
    )
