"""The benchmark scripts as processes: a wrong path is one error line naming it, and the data and index
folders follow the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_bench_common import REPO


@pytest.mark.parametrize(
    "argv",
    [
        ["bench/entities.py", "--collection", "nowhere.jsonl.gz"],
        ["bench/index_speed.py", "--input", "nowhere.jsonl"],
        ["bench/retrieval.py", "run", "--qrels", "nowhere.qrel"],
        ["bench/retrieval.py", "quality", "--topics", "nowhere.json"],
    ],
)
def test_a_wrong_path_is_one_error_line_without_traceback(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].endswith(f"no such file or folder: {argv[-1]}")


def test_default_data_and_index_follow_the_environment(tmp_path: Path) -> None:
    code = "import bench.common as c; print(c.DATA); print(c.DEFAULT_INDEX); print(c.DEV_2022_TOPICS.parent)"

    def defaults(**env: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert defaults() == [str(REPO.parent / "shared" / "data"), str(REPO / "indexes" / "cast2022-dev"),
                          str(REPO.parent / "shared" / "data" / "cast" / "2022-dev")]  # fmt: skip
    moved = defaults(CAST_DATA=str(tmp_path / "data"), CAST_BENCH_INDEX=str(tmp_path / "index"))
    assert moved == [
        str(tmp_path / "data"),
        str(tmp_path / "index"),
        str(tmp_path / "data" / "cast" / "2022-dev"),
    ]


def test_the_ikat_index_follows_the_environment(tmp_path: Path) -> None:
    def ikat_index(**env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", "import bench.common as c; print(c.IKAT_INDEX)"],
            cwd=REPO,
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert ikat_index() == str(REPO / "indexes" / "ikat2023-dev")
    assert ikat_index(CAST_IKAT_INDEX=str(tmp_path / "ikat")) == str(tmp_path / "ikat")
