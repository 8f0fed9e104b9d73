"""TREC run files: ``qid Q0 docid rank score tag``, one retrieved passage a line.

Writing follows Pyserini's ``TrecWriter``: within a query, passages are ordered by ``(-score, docid)`` so that ties
break the same way on every machine, ranks count from 1, and scores are written with six decimals.

Reading validates what ``trec_eval`` would trip over. A docid listed twice for one query is an error, as it is for
``trec_eval`` ("duplicate docs"): ``pytrec_eval`` and ``ir_measures`` would silently keep one of the two lines, so
the score would depend on which. Columns are split at ASCII whitespace, as ``trec_eval`` splits them, and ids
(:func:`id_problem`) and scores must be what every tool reads alike: a score in ASCII digits (Python's ``float``
also takes ``1_0``, ``٣`` or ``４``), an id without whitespace, control or format characters (a NUL, a
byte-order mark). Ranks are not checked, since ``trec_eval`` orders by score and ignores them.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from cast.errors import DataFormatError, excerpt
from cast.formats.textfiles import RUN_LINE_BYTES, utf8_lines
from cast.infra.atomic import write_lines_atomic

RUN_COLUMNS = 6
# What separates the columns of run and qrels files for trec_eval (Python's str.split also splits at U+2028, U+0085...).
ASCII_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
# A number as trec_eval reads it (C's strtod), in ASCII digits.
_ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ASCII_ODD = re.compile(r"[\x00-\x20\x7f]")


def id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a qid, a docid or a run tag (None: it can). One is a non-empty string without
    whitespace (it would split a run file's columns), control characters or format characters (a NUL, a
    zero-width space, a byte-order mark: invisible, and read differently by different tools).

    Example:
        >>> id_problem("31_1"), id_problem("\ufeff31_1"), id_problem(None)
        (None, 'holds U+FEFF (an invisible format character)', 'is null, not a string')
    """
    if not isinstance(value, str):
        return f"is {'null' if value is None else type(value).__name__}, not a string"
    if not value:
        return "is empty"
    if value.isascii():
        found = _ASCII_ODD.search(value)
        odd = found.group() if found else None
    else:
        odd = next((c for c in value if c.isspace() or unicodedata.category(c)[0] in "CZ"), None)
    if odd is None:
        return None
    kind = (
        "a space"
        if odd.isspace()
        else "a control character"
        if unicodedata.category(odd) == "Cc"
        else "an invisible format character"
    )
    return f"holds U+{ord(odd):04X} ({kind})"


def split_columns(line: str) -> list[str]:
    """A run or qrels line's columns, split as trec_eval splits them (at ASCII whitespace)."""
    return [column for column in ASCII_WHITESPACE.split(line) if column]


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
    if not path.exists():  # anything else there (a device, a FIFO, a folder) is named by the reader
        raise DataFormatError(path, "no such run file")
    run: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    for line_number, line in utf8_lines(path, RUN_LINE_BYTES):
        if not line.strip():
            continue
        parts = split_columns(line)
        if len(parts) != RUN_COLUMNS:
            raise DataFormatError(
                path,
                f"expected 6 fields 'qid Q0 docid rank score tag', found {len(parts)} in {excerpt(line.strip())}",
                line_number,
            )
        qid, _, docid, _, score_text, _ = parts
        for name, value in (("qid", qid), ("docid", docid)):
            problem = id_problem(value)
            if problem is not None:
                raise DataFormatError(path, f"{name} {excerpt(value)} {problem}", line_number)
        score = float(score_text) if _ASCII_NUMBER.fullmatch(score_text) else math.nan
        if not math.isfinite(score):
            raise DataFormatError(
                path,
                f"score {excerpt(score_text)} is not a finite number in ASCII digits (e.g. 12.5 or -3.2e-4)",
                line_number,
            )
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
    if id_problem(tag) is not None:
        raise ValueError(f"a run tag must be non-empty and without whitespace, got {tag!r}")
