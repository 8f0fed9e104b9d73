"""Bad inputs to `cast index build` that reach the JVM: refused with one clear error, and nothing left
behind that looks complete."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_index_audit import passage, write_jsonl

from cast.errors import CastError, DataFormatError
from cast.index.build import build_index
from cast.index.record import build_record


def test_repeated_ids_in_json_lines_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1"), passage("p2"), passage("p1")])
    with pytest.raises(DataFormatError, match=r"passage id 'p1' occurs a second time"):
        build_index([collection], tmp_path / "index", threads=1, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_java_says_nothing_of_a_malformed_record(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1"), {"contents": "no id"}])
    with pytest.raises(DataFormatError, match=r"c.jsonl:2: record has no 'id'"):
        build_index([collection], tmp_path / "index", threads=1, progress=False)
    captured = capfd.readouterr()
    assert "Exception" not in captured.err + captured.out  # Anserini's stack trace and log line held back


@pytest.mark.parametrize("records", [[], [passage("e1", " ")]], ids=["empty file", "only empty passages"])
def test_a_collection_without_text_is_an_error(tmp_path: Path, records: list[dict]) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", records)
    with pytest.raises(CastError, match=r"no passage with text in .*c.jsonl.*nothing to index"):
        build_index([collection], tmp_path / "index", threads=1, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_overwrite_does_not_delete_a_folder_that_is_no_index(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1")])
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "eg.run").write_text("results")
    with pytest.raises(CastError, match=r"runs holds files but no Lucene index, so --overwrite does not"):
        build_index([collection], folder, overwrite=True, progress=False)
    assert (folder / "eg.run").read_text() == "results"
    half_built = tmp_path / "half"  # an interrupted Lucene build elsewhere: its lock, no commit
    half_built.mkdir()
    (half_built / "write.lock").touch()
    (half_built / "_7.fdt").touch()
    assert build_index([collection], half_built, overwrite=True, threads=1, progress=False).indexed == 1
    assert not (half_built / "_7.fdt").exists()


def test_the_index_is_readable_as_the_umask_allows_and_killed_builds_are_removed(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1")])
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead = int(finished.stdout)
    host = socket.gethostname()
    killed = tmp_path / f".index.building-{host}-{dead}-abc123"
    (killed / "_0.fdt").parent.mkdir()
    (killed / "_0.fdt").write_text("partial")
    (tmp_path / f"{killed.name}.input-xyz").mkdir()
    running = tmp_path / f".index.building-{host}-{os.getpid()}-def456"  # another build, still running
    running.mkdir()
    mask = os.umask(0o022)
    try:
        build_index([collection], tmp_path / "index", threads=1, progress=False)
    finally:
        os.umask(mask)
    assert (tmp_path / "index").stat().st_mode & 0o777 == 0o755
    assert build_record(tmp_path / "index") == {
        "documents": 1,
        "empty": 0,
        "inputs": [str(collection)],
        "stemmer": "krovetz",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c.jsonl", "index", running.name])
