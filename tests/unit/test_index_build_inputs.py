"""Index builds' checks and readers before the JVM: a non-empty folder, read-ahead order and errors, the
stored document's fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from cast.core.records import Passage
from cast.errors import CastError, DataFormatError
from cast.index.build import _read_ahead, build_index, raw_document


def test_refuses_to_build_into_a_non_empty_directory(fixtures: Path, tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(CastError, match=r"taken already exists and is not empty; pass --overwrite"):
        build_index([fixtures / "index" / "passages.jsonl"], target, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
    assert (target / "notes.txt").read_text() == "keep me"


def test_read_ahead_keeps_order_and_raises_the_readers_error() -> None:
    def items():
        yield 1
        yield 2
        raise DataFormatError("c.jsonl", "bad line", 3)

    seen = []
    with pytest.raises(DataFormatError, match="c.jsonl:3: bad line"):
        for item in _read_ahead(items()):
            seen.append(item)
    assert seen == [1, 2]


def test_raw_document_fields() -> None:
    assert (
        raw_document(Passage("p1", "text", "Title")) == '{"id": "p1", "contents": "text", "title": "Title"}'
    )
    assert raw_document(Passage("p2", "caf\u00e9")) == '{"id": "p2", "contents": "caf\u00e9"}'
