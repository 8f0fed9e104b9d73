"""TREC run files: ``qid Q0 docid rank score tag``, one retrieved passage a line.

Writing follows Pyserini's ``TrecWriter``: within a query, passages are ordered by ``(-score, docid)`` so that ties
break the same way on every machine, ranks count from 1, and scores are written with six decimals.

Reading validates what ``trec_eval`` would trip over. A docid listed twice for one query is an error, as it is for
``trec_eval`` ("duplicate docs"): ``pytrec_eval`` and ``ir_measures`` would silently keep one of the two lines, so
the score would depend on which. Ranks are not checked, since ``trec_eval`` orders by score and ignores them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from cast.atomic import write_lines_atomic
from cast.errors import DataFormatError, excerpt
from cast.textfiles import RUN_LINE_BYTES, utf8_lines

RUN_COLUMNS = 6


def format_run_line(qid: str, docid: str, rank: int, score: float, tag: str) -> str:
    """One run-file line, newline included."""
    return f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"


def ranked(scored: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Passages in run order: by descending score, ties by ascending docid (Pyserini's ``TrecWriter`` order)."""
    return sorted(scored, key=lambda item: (-item[1], item[0]))


def format_query(qid: str, scored: Iterable[tuple[str, float]], tag: str) -> str:
    """The run lines of one query, in run order."""
    return "".join(
        format_run_line(qid, docid, rank, score, tag) for rank, (docid, score) in enumerate(ranked(scored), 1)
    )


def write_run(path: str | Path, rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> None:
    """Write a whole run file atomically (a temporary file renamed into place).

    Args:
        path: the run file to write.
        rankings: ``{qid: [(docid, score), ...]}``; queries are written in this mapping's order.
        tag: the run tag (last column); it must not contain whitespace.
    """
    check_tag(tag)
    write_lines_atomic(path, (format_query(qid, scored, tag) for qid, scored in rankings.items()))


class TrecRunWriter:
    """Appends one query's block of lines at a time to a run file, each block flushed to disk.

    Used for resumable runs: write ``NAME.run.partial`` query by query, then rename it when all are done.

    Example:
        >>> with TrecRunWriter("runs/lmd.run.partial", tag="lmd") as writer:
        ...     writer.write("31_1", [("MARCO_1", 12.5), ("CAR_2", 11.0)])
    """

    def __init__(self, path: str | Path, tag: str, *, append: bool = True):
        check_tag(tag)
        self.path = Path(path)
        self.tag = tag
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
        self._file = os.fdopen(os.open(self.path, flags, 0o666), "a", encoding="utf-8")  # a link is refused

    def write(self, qid: str, scored: Iterable[tuple[str, float]]) -> None:
        """Append the lines of one query (in run order) and make them durable."""
        self._file.write(format_query(qid, scored, self.tag))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TrecRunWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file as ``{qid: {docid: score}}`` (queries and passages in file order).

    Raises:
        DataFormatError: the file is missing or empty, a line has not six fields, a score is not a finite
            number, or a docid appears twice for one query.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "no such run file")
    run: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    for line_number, line in utf8_lines(path, RUN_LINE_BYTES):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != RUN_COLUMNS:
            raise DataFormatError(
                path,
                f"expected 6 fields 'qid Q0 docid rank score tag', found {len(parts)} in {excerpt(line.strip())}",
                line_number,
            )
        qid, _, docid, _, score_text, _ = parts
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise DataFormatError(path, f"score {excerpt(score_text)} is not a finite number", line_number)
        key = (qid, docid)
        if key in first_seen:
            raise DataFormatError(
                path,
                f"docid {docid} appears twice for query {qid} (first on line {first_seen[key]}); trec_eval "
                "refuses such runs: keep one line per (query, docid)",
                line_number,
            )
        first_seen[key] = line_number
        run.setdefault(qid, {})[docid] = score
    if not run:
        raise DataFormatError(path, "the run file is empty")
    return run


def check_tag(tag: str) -> None:
    """Refuse a run tag that would break the run file's columns (``ValueError``)."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"a run tag must be non-empty and without whitespace, got {tag!r}")
