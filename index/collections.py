"""Passage collections: readers that stream :class:`~cast.core.records.Passage` records from the formats CAsT uses.

Formats (``fmt`` names):

* ``jsonl``: Pyserini's JsonCollection, one JSON object a line with ``id``, ``contents`` and an optional
  ``title`` (plain or ``.gz``).
* ``msmarco``: MS MARCO passage ``collection.tsv``, ``pid TAB text``; ids become ``MARCO_<pid>``.
* ``car``: TREC CAR paragraph CBOR (``dedup.articles-paragraphs.cbor``); ids become ``CAR_<paraid>``.
* ``wapo``: Washington Post JSONL (v2 format: ``id``, ``title``, ``contents`` a list of typed blocks); each
  ``sanitized_html`` block is a passage with id ``WAPO_<docid>-<n>``, ``n`` counting those blocks from 1.
* ``ikat``: TREC iKAT passage texts (the ``*_psg_text.jsonl`` provenance files: ``doc_id``, ``passage_id``,
  ``passage_text``); ids are ClueWeb22 passage ids ``<doc_id>:<passage_id>``, as iKAT qrels write them. The
  organisers' passage collection (``id`` already ``doc:passage``, ``contents``) is read as ``jsonl``.

A directory is read file by file in name order. CAsT's duplicate lists (lines ``docid:dup1,dup2,...``) name
passages to drop; see :func:`read_duplicates`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from cast.core.records import Passage
from cast.errors import DataFormatError, excerpt
from cast.formats.runfile import id_problem
from cast.formats.textfiles import json_lines, utf8_lines

FORMATS = ("jsonl", "msmarco", "car", "wapo", "ikat")

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def read_passages(
    paths: str | Path | Iterable[str | Path],
    fmt: str | None = None,
    duplicates: frozenset[str] = frozenset(),
    left_out: list[str] | None = None,
) -> Iterator[Passage]:
    """Stream the passages of one or more files or directories.

    Args:
        paths: files or directories (a directory's files are read in name order, hidden files skipped).
        fmt: one of :data:`FORMATS`; ``None`` detects each file's format with :func:`detect_format`.
        duplicates: ids to drop (from :func:`read_duplicates`); a passage is dropped when its id, or the id of
            the document it comes from (with or without the collection prefix), is listed.
        left_out: if given, the ids of the passages dropped as duplicates are appended to it.

    Raises:
        DataFormatError: an unknown format, a malformed line (the error names file and line), or a passage id
            that occurs twice (a Lucene index would hold both, and rankings would repeat the id).
    """
    seen: set[str] = set()
    for path, file_format in collection_formats(paths, fmt):
        for passage, source_ids in _READERS[file_format](path):
            if duplicates and not duplicates.isdisjoint(source_ids):
                if left_out is not None:
                    left_out.append(passage.id)
                continue
            if passage.id in seen:
                raise DataFormatError(
                    path,
                    f"passage id {passage.id!r} occurs a second time; passage ids must be unique (is a file "
                    "given twice, or both as .jsonl and .jsonl.gz?)",
                )
            seen.add(passage.id)
            yield passage


def collection_formats(
    paths: str | Path | Iterable[str | Path], fmt: str | None = None
) -> list[tuple[Path, str]]:
    """Each file of ``paths`` (see :func:`collection_files`) with its format: ``fmt``, or the detected one.

    Raises:
        DataFormatError: an unknown ``fmt``, a missing path, or a file whose format cannot be detected.
    """
    files = list(collection_files(paths))
    if fmt is not None and fmt not in FORMATS:
        raise DataFormatError(
            ", ".join(map(str, files)), f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}"
        )
    return [(path, fmt or detect_format(path)) for path in files]


def detect_format(path: str | Path) -> str:
    """The format of a file, from its name (``.cbor``, ``.tsv``) or, for JSON lines, its first record.

    Raises:
        DataFormatError: the file's format is not one of :data:`FORMATS`.
    """
    path = Path(path)
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".cbor"):
        return "car"
    if name.endswith(".tsv"):
        return "msmarco"
    if name.endswith((".jsonl", ".json")):
        record = next((record for _, record in json_lines(path)), None)
        if record is None:
            return "jsonl"
        if "passage_text" in record:
            return "ikat"
        return "wapo" if isinstance(record.get("contents"), list) else "jsonl"
    raise DataFormatError(
        path, f"cannot tell the collection format from the file name; pass --format ({', '.join(FORMATS)})"
    )


def read_duplicates(path: str | Path) -> frozenset[str]:
    """The ids a CAsT duplicate list drops: every id after the colon of a ``docid:dup1,dup2,...`` line.

    Raises:
        DataFormatError: there is no such file, or a non-empty line has no colon.
    """
    if not Path(path).is_file():
        raise DataFormatError(path, "no such duplicate list (--duplicates)")
    dropped: set[str] = set()
    for number, line in utf8_lines(path):
        line = line.strip()
        if not line:
            continue
        kept, sep, dups = line.partition(":")
        if not sep or not kept.strip():
            raise DataFormatError(path, f"expected 'docid:dup1,dup2,...', got {line[:80]!r}", number)
        dropped.update(d.strip() for d in dups.split(",") if d.strip())
    return frozenset(dropped)


# Each reader yields (passage, ids a duplicate list may name for it).
_Reader = Callable[[Path], Iterator[tuple[Passage, tuple[str, ...]]]]


def passage_id(path: Path, value: Any, number: int, what: str = "record") -> str:
    """A record's ``id`` as the string the run files will hold: a string or an integer that is an id a run file can
    hold (:func:`~cast.formats.runfile.id_problem`: a run-file line is split on whitespace, so ``"a b"`` would be
    indexed and then break every run's file; a control or format character reads otherwise in other tools)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise DataFormatError(path, f"{what} has no 'id' (a non-empty string or an integer)", number)
    problem = id_problem(value)
    if problem is not None:
        raise DataFormatError(
            path, f"{what} id {excerpt(value)} {problem}, which run files cannot hold", number
        )
    return value


def _read_jsonl(path: Path) -> Iterator[tuple[Passage, tuple[str, ...]]]:
    for number, record in json_lines(path):
        docid, contents = passage_id(path, record.get("id"), number), record.get("contents")
        if not isinstance(contents, str):
            raise DataFormatError(path, "record has no text 'contents'", number)
        title = record.get("title")
        passage = Passage(id=docid, text=contents, title=title if isinstance(title, str) and title else None)
        yield passage, (passage.id,)


def _read_msmarco(path: Path) -> Iterator[tuple[Passage, tuple[str, ...]]]:
    for number, line in utf8_lines(path):
        line = line.rstrip("\r\n")
        if not line:
            continue
        pid, sep, text = line.partition("\t")
        if not sep:
            raise DataFormatError(path, "expected 'pid<TAB>text'", number)
        pid = passage_id(path, pid, number, "passage")
        yield Passage(id=f"MARCO_{pid}", text=text), (pid, f"MARCO_{pid}")


def _read_car(path: Path) -> Iterator[tuple[Passage, tuple[str, ...]]]:
    from trec_car.read_data import iter_paragraphs

    with open(path, "rb") as file:
        count = 0
        try:
            for paragraph in iter_paragraphs(file):
                pid = paragraph.para_id
                count += 1
                yield Passage(id=f"CAR_{pid}", text=paragraph.get_text()), (pid, f"CAR_{pid}")
        except Exception as e:  # cbor and trec_car raise plain exceptions on broken input
            raise DataFormatError(
                path, f"not a TREC CAR paragraphs file (after {count} paragraphs): {type(e).__name__}: {e}"
            ) from e


def _read_wapo(path: Path) -> Iterator[tuple[Passage, tuple[str, ...]]]:
    for number, record in json_lines(path):
        docid, blocks = passage_id(path, record.get("id"), number, "article"), record.get("contents")
        if not isinstance(blocks, list):
            raise DataFormatError(path, "article 'contents' is not a list of blocks", number)
        title = record.get("title") if isinstance(record.get("title"), str) else None
        paragraphs = (b for b in blocks if isinstance(b, dict) and b.get("type") == "sanitized_html")
        for n, block in enumerate(paragraphs, start=1):
            pid = f"WAPO_{docid}-{n}"
            yield (
                Passage(id=pid, text=html_text(block.get("content") or ""), title=title),
                (
                    docid,
                    f"WAPO_{docid}",
                    pid,
                ),
            )


def _read_ikat(path: Path) -> Iterator[tuple[Passage, tuple[str, ...]]]:
    for number, record in json_lines(path):
        docid, passage_number, text = (
            record.get("doc_id"),
            record.get("passage_id"),
            record.get("passage_text"),
        )
        if not isinstance(docid, str) or not docid:
            raise DataFormatError(path, "record has no 'doc_id'", number)
        if (
            not isinstance(passage_number, str | int)
            or isinstance(passage_number, bool)
            or passage_number == ""
        ):
            raise DataFormatError(path, "record has no 'passage_id'", number)
        if not isinstance(text, str):
            raise DataFormatError(path, "record has no text 'passage_text'", number)
        pid = f"{docid}:{passage_number}"
        yield Passage(id=pid, text=text.strip()), (docid, pid)


def html_text(fragment: str) -> str:
    """The visible text of an HTML fragment: tags removed, entities decoded, white space collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()


_READERS: dict[str, _Reader] = {
    "jsonl": _read_jsonl,
    "msmarco": _read_msmarco,
    "car": _read_car,
    "wapo": _read_wapo,
    "ikat": _read_ikat,
}


def collection_files(paths: str | Path | Iterable[str | Path]) -> Iterator[Path]:
    """The files of ``paths``: files as given, and each directory's files in name order (hidden ones skipped).

    Raises:
        DataFormatError: a path does not exist, or a directory holds no files.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not found:
                raise DataFormatError(path, "the directory holds no collection files")
            yield from found
        elif path.is_file():
            yield path
        else:
            raise DataFormatError(path, "no such file or directory")
