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
        ["bench/headings.py", "--input", "nowhere.jsonl"],
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


def bench_common_prints(code: str, **env: str) -> list[str]:
    """What ``code`` (given ``cast.benchmark.scripts`` as ``c``) prints in a fresh process with only ``env`` (and PATH) set."""
    done = subprocess.run(
        [sys.executable, "-c", f"import cast.benchmark.scripts as c; {code}"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_default_data_and_index_follow_the_environment(tmp_path: Path) -> None:
    code = "print(c.DATA); print(c.DEFAULT_INDEX); print(c.DEV_2022_TOPICS.parent)"
    assert bench_common_prints(code) == [str(REPO.parent / "shared" / "data"), str(REPO / "indexes" / "cast2022-dev"),
                                         str(REPO.parent / "shared" / "data" / "cast" / "2022-dev")]  # fmt: skip
    moved = bench_common_prints(
        code, CAST_DATA=str(tmp_path / "data"), CAST_BENCH_INDEX=str(tmp_path / "index")
    )
    assert moved == [
        str(tmp_path / "data"),
        str(tmp_path / "index"),
        str(tmp_path / "data" / "cast" / "2022-dev"),
    ]


def test_the_ikat_index_follows_the_environment(tmp_path: Path) -> None:
    code = "print(c.IKAT_INDEX)"
    assert bench_common_prints(code) == [str(REPO / "indexes" / "ikat2023-dev")]
    assert bench_common_prints(code, CAST_IKAT_INDEX=str(tmp_path / "ikat")) == [str(tmp_path / "ikat")]


def test_the_generation_bench_runs_without_a_data_folder(tmp_path: Path) -> None:
    # As on a bare GPU machine: the seq2seq timing reads no data, so a missing data folder must not stop it.
    done = subprocess.run(
        [sys.executable, "bench/generation_latency.py", "--device", "cpu", "--models", "t5-base", "--input-tokens",
         "8", "--output-tokens", "2", "--repeats", "1", "--warmup", "0"],
        cwd=REPO, env={"PATH": "/usr/bin:/bin", "CAST_DATA": str(tmp_path / "none")}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[-1].split()
    assert row[:4] == ["t5-base", "223", "float32", "plain"] and row[6] == "yes"
