"""Answer files from a PyTerrier answerer's frame (:class:`cast.pyterrier.Answerer`'s: a row per query with
``qid``, its ``answer`` and ``selection``): TREC RAG 2024 (``trec-rag24``, :mod:`cast.formats.rag_runs`) and TREC
iKAT 2025 (``ikat2025``, :mod:`cast.formats.ikat_runs`), the lines ``cast run --format`` writes from its outputs.

Each turn's references are its ranking: the rows of ``results`` (a ranking stage's frame, e.g. the re-ranker's),
where given, else the passages the answer was written from (its ``selection``), by score. The topic text is the
user's utterance (``utterance``, else ``query_0``: the query before the rewriter, else ``query``). The iKAT file's
PTKB provenance is the statements chosen for the turn, from ``ptkb_selection`` (a
:class:`~cast.core.records.PTKBSelection`, as a rewriter with a PTKB selector gives it); none where the frame has
none.

Example:
    >>> write_answer_file(answers, "runs/eg.trec-rag24.jsonl", "trec-rag24", run_id="eg")  # doctest: +SKIP
    []
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.core.records import Answer, PTKBSelection, Selection
from cast.errors import CastError
from cast.formats.ikat_runs import MAX_PASSAGES, TurnOutput, ikat_run, ptkb_provenance, write_ikat_lines
from cast.formats.rag_runs import rag24_entry, write_rag24_entries

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("trec-rag24", "ikat2025")


def write_answer_file(
    answers: pd.DataFrame,
    path: str | Path,
    fmt: str,
    *,
    run_id: str,
    results: pd.DataFrame | None = None,
    run_type: str = "automatic",
    team_id: str = "",
) -> list[str]:
    """Write the ``fmt`` file (:data:`FORMATS`) of an answerer's frame atomically, if it keeps the format's rules.

    Args:
        run_id: the run's name in the file.
        results: a result frame (``qid``, ``docno``, ``score``) whose rankings are the references.
        run_type: iKAT 2025's run type (``automatic``, ``manual``, ``generation-only``).
        team_id: iKAT 2025's team id.

    Returns:
        The format's problems (a turn without references, an iKAT passage id that is not ClueWeb22's...); if there
        are any, nothing is written (and a file there before is removed).

    Raises:
        CastError: an unknown format, or a frame without ``qid`` and ``answer``.
    """
    if fmt not in FORMATS:
        raise CastError(f"unknown answer file format {fmt!r}; choose one of {', '.join(FORMATS)}")
    missing = [column for column in ("qid", "answer") if column not in answers.columns]
    if missing:
        raise CastError(
            f"the answers frame lacks the column(s) {', '.join(missing)}: give an Answerer's output"
        )
    rankings = _rankings(results) if results is not None else {}
    turns = []
    for row in answers.to_dict("records"):
        qid = str(row["qid"])
        answer: Answer = row["answer"]
        selection = row.get("selection")
        ranking = rankings.get(qid) or (
            {p.id: p.score for p in selection.passages} if isinstance(selection, Selection) else {}
        )
        ptkb = row.get("ptkb_selection")
        turns.append((qid, _topic(row), ranking, answer, ptkb if isinstance(ptkb, PTKBSelection) else None))
    if fmt == "trec-rag24":
        return write_rag24_entries(
            path,
            [rag24_entry(qid, topic, ranking, answer, run_id) for qid, topic, ranking, answer, _ in turns],
        )
    outputs = [
        TurnOutput(
            qid=qid,
            ranking=tuple(sorted(ranking.items(), key=lambda item: (-item[1], item[0]))[:MAX_PASSAGES]),
            response=answer.text,
            used=answer.source_ids,
            passage_texts={},
            ptkb=ptkb_provenance(ptkb),
        )
        for qid, _, ranking, answer, ptkb in turns
    ]
    return write_ikat_lines(path, ikat_run(outputs, fmt, run_id, run_type, team_id), fmt)


def _rankings(results: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{qid: {docno: score}}`` of a result frame."""
    rankings: dict[str, dict[str, float]] = {}
    for qid, docno, score in zip(results["qid"], results["docno"], results["score"], strict=True):
        rankings.setdefault(str(qid), {})[str(docno)] = float(score)
    return rankings


def _topic(row: Mapping[str, Any]) -> str:
    """The user's utterance of an answers row."""
    for column in ("utterance", "query_0", "query"):
        value = row.get(column)
        if isinstance(value, str) and value.strip():
            return value
    return ""
