"""Five speed figures of this checkout beside a baseline's, measured on the same machine in one run, so that a
slowdown is seen when it is made:

* ``demo``: ``cast demo`` with an empty home folder (the sample index and its entity resources, the Wikipedia
  knowledge base, the exported encoder, six answers); with ``--setup``, ``scripts/setup.sh`` into a fresh virtual
  environment is timed too (minutes: it installs every package).
* ``index``: ``cast index build`` of the collection (``--collection``, its first ``--passages`` passages).
* ``dictionary``: ``cast entity dictionary`` of the same passages.
* ``kb``: ``cast entity kb``.
* ``run``: a whole offline run (``cast run --config offline``) of ``--topics`` over ``--index`` without a passage
  store, from an empty cache (but for the encoder export, built once per machine: copied from ``--cache`` where
  it is there); seconds per turn are the whole process's (start-up included) over the turns answered.

The baseline is a git ref (``--baseline``, default ``HEAD~1``: the previous commit) checked out into a temporary
worktree; both sides run with this checkout's Python environment, each from its own source folder. The sides
alternate (baseline first, then this checkout; ``--repeats`` times), and each figure prints the median wall
seconds, CPU seconds (user + system, child processes included) and peak memory of each side, and the ratio of
this checkout's to the baseline's. The machine's load average is printed too: on a shared machine compare
ratios, not seconds. The two sides' outputs are compared (byte for byte; answers records less their timings)::

    .venv/bin/python bench/speed.py --passages 50000 --index INDEX
    .venv/bin/python bench/speed.py --baseline main --only dictionary,kb --passages 820000
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cast.benchmark.scripts import (
    DEFAULT_INDEX,
    DEV_2022_TOPICS,
    REPO,
    WIKI,
    existing_path,
    load_average,
    run,
    run_measured,
)

FIGURES = ("demo", "index", "dictionary", "kb", "run")
# Runs a checkout's command-line interface with this environment's Python, from the checkout's own folder (the
# current directory comes first on sys.path, before the installed package).
CLI = "import sys; from cast.cli import main; sys.exit(main())"


def cut_collection(sources: list[Path], passages: int, target: Path) -> int:
    """The first ``passages`` lines of the JSON-lines ``sources`` (in order) written to ``target``; their number."""
    written = 0
    with open(target, "wb") as out:
        for source in sources:
            opener = gzip.open if source.name.endswith(".gz") else open
            with opener(source, "rb") as lines:
                for line in lines:
                    if written == passages:
                        return written
                    if line.strip():
                        out.write(line)
                        written += 1
    return written


class Side:
    """One checkout: where its source lies and where its outputs go."""

    def __init__(self, name: str, source: Path, work: Path):
        self.name, self.source, self.work = name, source, work
        work.mkdir(parents=True)

    def cast(self, *args: str) -> list[str]:
        return [sys.executable, "-c", CLI, *args]

    def measure(
        self, command: list[str], what: str, env: dict[str, str] | None = None
    ) -> tuple[float, float, int]:
        log = self.work / f"{what}.log"
        return run_measured(command, log, f"{self.name}: {what}", cwd=self.source, env=env)


def figure_commands(
    side: Side, args: argparse.Namespace, collection: Path
) -> dict[str, tuple[list[str], dict]]:
    """Each figure's command line and environment for ``side`` (all outputs under its work folder)."""
    home = side.work / "home"
    environment = dict(os.environ)
    commands: dict[str, tuple[list[str], dict]] = {
        "demo": (side.cast("demo"), {**environment, "HOME": str(home)}),
        "index": (side.cast("index", "build", "--input", str(collection), "--index", str(side.work / "index"),
                            "--overwrite"), environment),
        "dictionary": (side.cast("entity", "dictionary", "--input", str(collection), "--output",
                                 str(side.work / "entities")), environment),
        "kb": (side.cast("entity", "kb", "--output", str(side.work / "kb.sqlite"), "--overwrite"), environment),
        "run": (side.cast("run", "--config", "offline", "--index", str(args.index), "--topics", str(args.topics),
                          "--output", str(side.work / "run"), "--overwrite", "--set", f"cache_dir={side.work / 'cache'}",
                          "--set", f"linker.kb_path={side.work / 'kb.sqlite' if (side.work / 'kb.sqlite').is_file() else args.kb}"),
                environment),
    }  # fmt: skip
    return commands


def prepare(side: Side, figure: str, args: argparse.Namespace) -> None:
    """Make a figure's starting state: an empty home, a fresh cache (seeded with the encoder export)."""
    if figure == "demo":
        shutil.rmtree(side.work / "home", ignore_errors=True)
        (side.work / "home").mkdir()
    if figure == "run":
        cache = side.work / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir()
        seed = Path(args.cache).expanduser() / "encoders"
        if seed.is_dir():
            shutil.copytree(seed, cache / "encoders")


def answers_without_timings(path: Path) -> list[dict]:
    from cast.formats.textfiles import json_lines

    return [{**record, "timings": None} for _, record in json_lines(path)]


def same_outputs(figure: str, sides: list[Side]) -> str:
    """Whether the two sides' outputs of a figure are the same (byte for byte; answers less their timings)."""
    a, b = (side.work for side in sides)
    if figure == "dictionary":
        folder = Path("entities")
        names = [
            folder / "dictionary.json",
            folder / "postings.offsets.npy",
            folder / "postings.passages.npy",
        ]
        same = all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)
    elif figure == "kb":
        same = filecmp.cmp(a / "kb.sqlite", b / "kb.sqlite", shallow=False)
    elif figure == "run":
        same = filecmp.cmp(a / "run.run", b / "run.run", shallow=False) and answers_without_timings(
            a / "run.answers.jsonl"
        ) == answers_without_timings(b / "run.answers.jsonl")
    else:
        return ""
    return "same outputs" if same else "OUTPUTS DIFFER"


def setup_figure(side: Side) -> tuple[float, float, int]:
    """``scripts/setup.sh`` of a side into a fresh virtual environment."""
    venv = side.work / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    environment = {**os.environ, "VENV": str(venv)}
    return side.measure(["bash", "scripts/setup.sh"], "setup", environment)


def describe(wall: float, cpu: float, peak: int, per: str = "") -> str:
    return f"{wall:8.1f} s{per} wall {cpu:8.1f} s cpu {peak / 2**30:5.2f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default="HEAD~1", help="the git ref to compare with (default: HEAD~1)")
    parser.add_argument("--only", default=",".join(FIGURES), help=f"figures to take, of {', '.join(FIGURES)}")
    parser.add_argument("--setup", action="store_true", help="time the set-up into a fresh environment too")
    parser.add_argument(
        "--collection", type=existing_path, nargs="+", default=[WIKI], help="JSON-lines passages"
    )
    parser.add_argument("--passages", type=int, default=50_000, help="passages of the collection to take")
    parser.add_argument("--index", default=DEFAULT_INDEX, help="the index the run figure searches")
    parser.add_argument(
        "--topics", type=existing_path, default=DEV_2022_TOPICS, help="the run figure's topics"
    )
    parser.add_argument(
        "--kb",
        default="~/.cache/cast-toolkit/wikipedia-kb.sqlite",
        help="the knowledge base of the run figure when the kb figure is not taken",
    )
    parser.add_argument(
        "--cache", default="~/.cache/cast-toolkit", help="where the encoder export is copied from"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side per figure (default: 1)")
    parser.add_argument(
        "--keep", type=Path, help="a folder to keep the outputs in (default: a temporary one)"
    )
    args = parser.parse_args()  # fmt: skip
    figures = [f for f in args.only.split(",") if f]
    unknown = set(figures) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(sorted(unknown))}; choose from {', '.join(FIGURES)}")
    if "run" in figures and not Path(args.index).expanduser().is_dir():
        parser.error(
            f"no index at {args.index} for the run figure (--index), or leave the figure out (--only)"
        )
    figures.sort(key=FIGURES.index)  # dictionary after index, run after kb

    root = Path(args.keep or tempfile.mkdtemp(prefix="cast-speed-")).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    baseline_source = root / "baseline-source"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(baseline_source), args.baseline],
        check=True,
        capture_output=True,
    )
    try:
        commit = subprocess.run(
            ["git", "-C", str(baseline_source), "log", "-1", "--format=%h %s"], capture_output=True, text=True
        ).stdout.strip()
        sides = [
            Side(f"baseline {args.baseline}", baseline_source, root / "baseline"),
            Side("this", REPO, root / "this"),
        ]
        collection = root / "collection.jsonl"
        passages = cut_collection(args.collection, args.passages, collection)
        print(f"baseline: {commit}; {passages:,} passages; outputs in {root}; {load_average()}")
        if args.setup:
            report("setup", [[setup_figure(side) for _ in range(args.repeats)] for side in sides], "")
        for figure in figures:
            results: list[list[tuple[float, float, int]]] = [[], []]
            for _ in range(args.repeats):
                for number, side in enumerate(sides):
                    prepare(side, figure, args)
                    command, environment = figure_commands(side, args, collection)[figure]
                    results[number].append(side.measure(command, figure, environment))
            turns = None
            if figure == "run":
                turns = len(answers_without_timings(sides[1].work / "run.answers.jsonl"))
            report(figure, results, same_outputs(figure, sides), turns)
        print(load_average())
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline_source)], check=False
        )
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def report(
    figure: str, results: list[list[tuple[float, float, int]]], note: str, turns: int | None = None
) -> None:
    """One line per side (medians) and the ratio of this checkout's wall and CPU seconds to the baseline's."""
    medians = [tuple(statistics.median(r[i] for r in runs) for i in range(3)) for runs in results]
    per, scale = ("/turn", 1 / turns) if turns else ("", 1.0)
    (wall_a, cpu_a, peak_a), (wall_b, cpu_b, peak_b) = medians
    print(
        f"{figure:<10} baseline {describe(wall_a * scale, cpu_a * scale, int(peak_a), per)} | "
        f"this {describe(wall_b * scale, cpu_b * scale, int(peak_b), per)} | "
        f"ratio wall {wall_b / wall_a:.2f} cpu {cpu_b / cpu_a:.2f}"
        + (f" | {turns} turns" if turns else "")
        + (f" | {note}" if note else "")
    )


if __name__ == "__main__":
    sys.exit(run(main))
