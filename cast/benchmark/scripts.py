"""What the benchmark scripts of bench/ share: where the data lies by default, path arguments checked as they are
parsed, errors reported in one line, and commands timed as processes.

A script imports it as any module of the package (``from cast.benchmark.scripts import ...``) and ends with
``sys.exit(run(main))``. The defaults are folders beside the repository the package is installed from (editable,
as ``make setup`` installs it), as the scripts and the docs name them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cast.errors import CastError

REPO = Path(__file__).resolve().parents[2]
# The data folder (its README describes it) and the indexes built from it, as `cast index build` in the docs makes
# them; each script also takes them as arguments. CAST_DATA, CAST_BENCH_INDEX (CAsT 2022 dev) and CAST_IKAT_INDEX
# (iKAT 2023 dev) move the defaults; bench/pooled.py's index is CAST_POOLED_INDEX or its --index.
DATA = Path(os.environ.get("CAST_DATA") or REPO.parent / "shared" / "data").expanduser()
WIKI = DATA / "wiki" / "enwiki-2013-core.jsonl.gz"
DEV_2022 = DATA / "cast" / "2022-dev"
DEV_2022_TOPICS = DEV_2022 / "2022_evaluation_topics_flattened_duplicated_v1.0.json"
DEV_2022_QRELS = DEV_2022 / "cast2022.provenance.qrel"
DEV_2022_PASSAGES = DEV_2022 / "provenance_passages.jsonl"
DEFAULT_INDEX = str(
    Path(os.environ.get("CAST_BENCH_INDEX") or REPO / "indexes" / "cast2022-dev").expanduser()
)
IKAT_INDEX = str(Path(os.environ.get("CAST_IKAT_INDEX") or REPO / "indexes" / "ikat2023-dev").expanduser())


def documented_parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser described by its docstring: the first paragraph, and the examples after ``Usage:``."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog="usage examples:" + doc.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def existing_path(value: str) -> Path:
    """An argparse ``type``: a file or folder that exists (a string default is checked too)."""
    path = Path(value).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {path}")
    return path


def require_paths(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Stops as argparse does when a path argument left at a :class:`~pathlib.Path` default does not exist: such a
    default is not checked by :func:`existing_path` at parsing, so a mode that does not read it needs no data."""
    for name in names:
        path = getattr(args, name)
        if not path.exists():
            parser.error(f"argument --{name}: no such file or folder: {path}")


def load_average() -> str:
    """The machine's load average (other jobs share it), to print beside timings."""
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def run(main: Callable[[], int]) -> int:
    """``main()``'s exit status; a :class:`~cast.errors.CastError` is printed as one line (status 1), and an
    interruption as ``interrupted`` (status 130), without a traceback."""
    script = Path(sys.argv[0]).name
    try:
        return main()
    except CastError as e:
        print(f"{script}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{script}: interrupted", file=sys.stderr)
        return 130


def run_measured(
    command: list[str], log: Path, what: str, *, cwd: Path = REPO, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """Run ``command`` in ``cwd`` (output to ``log``): its wall-clock seconds, CPU seconds (user + system, its
    waited-for child processes included) and peak resident memory in bytes. Exits, naming ``what`` and the log, if
    the command fails."""
    started = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    code = process.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, so tell Popen
    if code != 0:
        sys.exit(f"{what} failed with exit code {code}; see {log}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024  # Linux reports kilobytes
