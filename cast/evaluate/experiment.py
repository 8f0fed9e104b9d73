"""Evaluation as a library: several systems' files scored turn by turn, ready for :func:`report.compare`.

``cast eval`` and the benchmark scripts are thin layers over these functions; they take paths and settings, never
command-line state. Systems are named after their files (:func:`~cast.formats.answers.system_name`).

Example:
    >>> from cast.evaluate.experiment import evaluate_runs
    >>> from cast.evaluate.report import compare
    >>> evaluations = evaluate_runs(["runs/o.run", "runs/eg.run"], "cast2022.qrel")  # doctest: +SKIP
    >>> compare({n: e.per_turn for n, e in evaluations.items()}, "o", correction="holm")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cast.core.config import DEFAULT_CONFIG, load_config
from cast.core.registry import stage_class
from cast.errors import CastError
from cast.evaluate import answers as ans
from cast.evaluate import nuggets as nug
from cast.evaluate.answers import DEFAULT_REFERENCE_GRADE, DEFAULT_SUPPORT_THRESHOLD, AnswerEvaluation
from cast.evaluate.retrieval import RetrievalEvaluation, evaluate_run
from cast.formats.answers import AnswersFile, read_answers, system_name
from cast.formats.runfile import read_run
from cast.formats.topics import load_topics, read_qrels
from cast.infra.resources import Resources

REFERENCE_KINDS = ("responses", "qrels")


def evaluate_runs(
    runs: Sequence[str | Path], qrels: str | Path, *, rel: int = 1
) -> dict[str, RetrievalEvaluation]:
    """Evaluate each run file against the qrels file, keyed by system name.

    Raises:
        CastError: two files share a system name, or a run has no turn the qrels judge.
    """

    judgements = read_qrels(qrels)
    evaluations = {}
    for name, path in zip(unique_names(runs), runs, strict=True):
        run = read_run(path)
        evaluation = evaluate_run(run, judgements, rel)
        if len(evaluation.missing_turns) == len(evaluation.per_turn):
            # Every figure would be 0 (or NaN): the run and the qrels are of different topics or years.
            raise CastError(
                f"no turn of {path} is judged in {qrels} (run turns e.g. {next(iter(run))}, judged turns "
                f"e.g. {next(iter(evaluation.per_turn.index), 'none')}): give the qrels of the run's topics"
            )
        evaluations[name] = evaluation
    return evaluations


def evaluate_answer_files(
    answers: Sequence[str | Path | AnswersFile],
    *,
    topics: str | Path | None = None,
    qrels: str | Path | None = None,
    references: str | None = None,
    reference_grade: int = DEFAULT_REFERENCE_GRADE,
    multi_reference: str = "max",
    collection: Sequence[str | Path] | None = None,
    index: str | Path | None = None,
    support_threshold: float = DEFAULT_SUPPORT_THRESHOLD,
    verifier: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, AnswerEvaluation]:
    """Evaluate each answers file against one set of references, keyed by system name.

    Args:
        answers: answers files (paths, or files already read with :func:`~cast.formats.answers.read_answers`).
        topics: a topics file with written responses (CAsT 2022).
        qrels: a qrels file whose passages graded ``reference_grade`` or higher are the references.
        references: ``responses`` (the topics' written responses) or ``qrels``; by default responses when
            ``topics`` is given, else qrels.
        reference_grade: the lowest grade of a reference passage.
        multi_reference: ``max`` (best score over a turn's references) or ``concat``.
        collection: collection files holding the passage texts (for qrels references and groundedness).
        index: a Lucene index holding the passage texts, instead of ``collection``.
        support_threshold: the unigram F1 from which an answer sentence counts as supported.
        verifier: the settings of a claims verifier (``{}``: its defaults) whose measures to add (``verified``,
            ``claim_support``); needs the passage texts.
        progress: show a progress bar per system.

    Raises:
        CastError: the references cannot be made from what was given, or a file has no turn with a reference.
    """
    from tqdm import tqdm

    files = [a if isinstance(a, AnswersFile) else read_answers(a) for a in answers]
    names = unique_names([f.path for f in files])
    texts_by_qid, described, texts = reference_texts(
        references,
        topics=topics,
        qrels=qrels,
        reference_grade=reference_grade,
        collection=collection,
        index=index,
        needed_ids={pid for f in files for a in f.answers.values() for pid in a.source_ids},
    )
    scorer = ans.TextScorer(multi_reference)
    checker = claims_verifier(verifier) if verifier is not None else None
    evaluations = {}

    def progress_of(name: str) -> Callable[[Iterable[Any]], Iterable[Any]]:
        return lambda items: tqdm(items, desc=f"scoring {name}", leave=False, disable=not progress)

    for name, answers_file in zip(names, files, strict=True):
        if not set(answers_file.answers) & set(texts_by_qid):
            raise CastError(
                f"no turn of {answers_file.path} has a reference in {described} (answered turns e.g. "
                f"{next(iter(answers_file.answers))}, referenced e.g. {next(iter(texts_by_qid), 'none')}): give "
                "the topics or qrels of the answers' turns"
            )
        evaluations[name] = ans.evaluate_answers(
            answers_file,
            texts_by_qid,
            scorer=scorer,
            references_name=described,
            passage_texts=texts,
            support_threshold=support_threshold,
            verifier=checker,
            progress=progress_of(name),
        )
    return evaluations


def reference_texts(
    references: str | None,
    *,
    topics: str | Path | None = None,
    qrels: str | Path | None = None,
    reference_grade: int = DEFAULT_REFERENCE_GRADE,
    collection: Sequence[str | Path] | None = None,
    index: str | Path | None = None,
    needed_ids: Iterable[str] = (),
) -> tuple[dict[str, list[str]], str, dict[str, str] | None]:
    """Each turn's reference texts, what they are (for messages), and the texts of the passages read from
    ``collection`` or ``index`` (the references' and ``needed_ids``; ``None`` where neither is given). The
    arguments are :func:`evaluate_answer_files`'s.

    Raises:
        CastError: the references cannot be made from what was given.
    """
    kind = references or ("responses" if topics is not None else "qrels")
    if kind not in REFERENCE_KINDS:
        raise CastError(f"unknown references {kind!r}; choose {' or '.join(REFERENCE_KINDS)}")
    needed = set(needed_ids)
    reference_ids: dict[str, list[str]] = {}
    if kind == "responses":
        if topics is None:
            raise CastError("--references responses needs --topics (a topics file with written responses)")

        texts_by_qid = ans.response_references(load_topics(topics))
        described = f"the written responses of {Path(topics).name}"
        if not texts_by_qid:
            raise CastError(f"{topics} has no written responses; use --references qrels with --qrels")
    else:
        if qrels is None:
            raise CastError("--references qrels needs --qrels")

        reference_ids = ans.relevant_passage_ids(read_qrels(qrels), reference_grade)
        needed |= {pid for ids in reference_ids.values() for pid in ids}
        described = f"the passages graded {reference_grade}+ in {Path(qrels).name}"
    texts = None
    if collection:
        texts = ans.passages_from_collection(collection, needed)
    elif index is not None:
        texts = ans.passages_from_index(index, needed)
    if kind == "qrels":
        if texts is None:
            raise CastError("--references qrels needs the passage texts: give --collection or --index")
        texts_by_qid, missing = ans.passage_references(reference_ids, texts)
        if missing:
            described += f" ({len(missing)} reference passages not found, e.g. {missing[0]})"
    return texts_by_qid, described, texts


def claims_verifier(settings: dict[str, Any]) -> Any:
    """A claims verifier (:class:`cast.summarize.verify.ClaimVerifier`) with ``settings``, on the default profile's cache
    and encoder (sentence embeddings are cached there)."""

    profile = load_config(DEFAULT_CONFIG)
    shared: dict[str, Any] = {
        key: profile[key] for key in ("cache_dir", "device", "encoder") if key in profile
    }
    return stage_class("verifier", "claims").from_config(dict(settings), Resources(shared))


def unique_names(paths: Sequence[str | Path]) -> list[str]:
    """The system names of ``paths``; two files with one name are an error (their rows would merge)."""

    names = [system_name(p) for p in paths]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CastError(f"several files are named {repeated[0]!r}: give each system's file a distinct name")
    return names


def evaluate_nugget_files(
    answers: Sequence[str | Path],
    *,
    nuggetizer: Any,
    nuggets_path: Path,
    topics: str | Path,
    references: str | None = None,
    qrels: str | Path | None = None,
    reference_grade: int = DEFAULT_REFERENCE_GRADE,
    collection: Sequence[str | Path] | None = None,
    index: str | Path | None = None,
    turns: Sequence[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each answers file's nugget scores per turn (a data frame of :data:`cast.evaluate.nuggets.MEASURES` by
    qid), keyed by system name, and the nuggets they were scored against, by qid.

    The nuggets are read from ``nuggets_path`` where it exists (made earlier, perhaps reviewed); otherwise they
    are made by ``nuggetizer`` (:class:`cast.evaluate.nuggets.Nuggetizer`) from each turn's references (the
    arguments of :func:`evaluate_answer_files`) and written there. The query of a turn is its manual rewrite in
    ``topics`` (its utterance where it has none). ``turns`` limits the evaluation to those qids.

    Raises:
        CastError: no turn is both answered and referenced.
    """
    import pandas as pd

    files = [read_answers(a) for a in answers]
    names = unique_names([f.path for f in files])
    queries = {
        t.qid: t.manual_rewrite or t.utterance for c in load_topics(topics) for t in c.turns if t.utterance
    }
    answered = {q for f in files for q in f.answers}
    if nuggets_path.exists():
        made = nug.read_nuggets(nuggets_path)
        wanted = [q for q in made if q in answered and (turns is None or q in turns)]
    else:
        texts_by_qid, described, _ = reference_texts(
            references, topics=topics, qrels=qrels, reference_grade=reference_grade, collection=collection,
            index=index,
        )  # fmt: skip
        wanted = [q for q in queries if q in texts_by_qid and q in answered and (turns is None or q in turns)]
        if not wanted:
            raise CastError(
                f"no answered turn has a reference in {described} (answered e.g. {next(iter(answered), 'none')})"
            )
        asked = {q: queries[q] for q in wanted}
        texts = nuggetizer.create(asked, {q: texts_by_qid[q] for q in wanted})
        labelled = nuggetizer.label(asked, texts)
        kind = references or ("responses" if qrels is None else "qrels")
        made = {q: nug.TurnNuggets(q, asked[q], kind, tuple(labelled[q])) for q in wanted}
        nug.write_nuggets(nuggets_path, list(made.values()))
    if not wanted:
        raise CastError(f"no answered turn has nuggets in {nuggets_path}")
    scores = {}
    for name, answers_file in zip(names, files, strict=True):
        judged = {q: answers_file.answers[q].text for q in wanted if q in answers_file.answers}
        support = nuggetizer.assign(
            {q: made[q].query for q in judged}, {q: made[q].nuggets for q in judged}, judged
        )
        rows = {q: nug.nugget_scores(made[q].nuggets, support[q]) for q in judged}
        scores[name] = pd.DataFrame.from_dict(rows, orient="index", columns=list(nug.MEASURES))
    return scores, made
