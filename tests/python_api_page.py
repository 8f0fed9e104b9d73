"""The Python API page (docs/python-api.md) as the notebook it is: its Python cells, run in order in one process,
on the six-passage fixture index, by the interpreter of an installed wheel (tests/system/test_wheel_install.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "python-api.md"
FIXTURES = REPO / "tests" / "fixtures"
# The qrels of the fixture conversations (tests/fixtures/core/conversations.json).
QRELS = {"1_1": {"p1": 2}, "1_2": {"p4": 3}, "1_3": {"p2": 3}, "2_1": {"p3": 3}, "2_2": {"p6": 3}}


def cells(page: Path = PAGE) -> list[str]:
    """The page's Python cells, in order."""
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def run_page(python: str | Path, index: Path, folder: Path) -> subprocess.CompletedProcess:
    """The page's cells run as one script by ``python`` in ``folder`` (its cache there), on ``index`` with the
    fixture conversations and their qrels; the process's output, whatever its exit status."""
    qrels = folder / "core.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    script = folder / "python_api.py"
    script.write_text("\n".join(cells()))
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "CAST_INDEX": str(index),
        "CAST_TOPICS": str(FIXTURES / "core" / "conversations.json"),
        "CAST_QRELS": str(qrels),
        "CAST_CACHE": str(folder / "cache"),
        "OPENBLAS_NUM_THREADS": "1",  # numpy's BLAS threads and the JVM in one process (bench/pooled.py)
    }
    return subprocess.run(
        [str(python), str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=1200
    )


def check_output(done: subprocess.CompletedProcess) -> None:
    """What the page's cells print, as the page says: two answered turns, the measures, the comparison, the
    follow-up's answer, PyTerrier's table and the answer file written."""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "Which river flows through it?\n  query:" in out and "River Clyde" in out
    assert "nDCG@3" in out and "MRR" in out
    assert "LMD >> MiniLM" in out and "written" in out.splitlines()[-1]
