"""Sweep cost: a sweep of 9 selector settings against one full run plus 9 selections.

Runs, each as a user would (a subprocess, models and index loaded by it):

0. ``cast run`` once untimed, so that both timed commands find the caches (passage embeddings, the OS's file
   cache) equally warm (``--no-warm-up`` skips it);
1. ``cast run`` of the base config over the topics: one full run (wall seconds ``W_run``);
2. ``cast sweep`` of the grid (9 points by default: ``selector.gamma`` x ``selector.weight``): ``W_sweep``.

The later stages' own cost per point is read from the sweep's answers files (each turn's recorded selection and
answer seconds, and linking where the shared pass stopped before it), summed over turns: ``S``. The goal is a sweep
costing little more than ``W_run + S`` (printed as a ratio), where 9 full runs would cost ``9 x W_run``.

Usage:
    .venv/bin/python bench/sweep.py --out /tmp/sweep-bench
    .venv/bin/python bench/sweep.py --out /tmp/sweep-bench --grid selector.gamma=0,0.5,1 --grid selector.n=2,3,4
    .venv/bin/python bench/sweep.py --out /tmp/sweep-bench --ray --ray-workers 2
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from cast.benchmark.scripts import (
    DEFAULT_INDEX,
    DEV_2022_QRELS,
    DEV_2022_TOPICS,
    run,
    run_measured,
)

DEFAULT_GRID = ["selector.gamma=0,0.25,0.5", "selector.weight=0.5,0.7,0.9"]
# The stages a sweep point runs itself (linking too where the shared pass stopped after re-ranking).
LATER_STAGES = ("link", "select", "summarize")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="usage examples:" + __doc__.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topics", type=Path, default=DEV_2022_TOPICS, help="topics (default: %(default)s)")
    parser.add_argument("--qrels", type=Path, default=DEV_2022_QRELS, help="qrels (default: %(default)s)")
    parser.add_argument(
        "--index", type=Path, default=Path(DEFAULT_INDEX), help="index (default: %(default)s)"
    )
    parser.add_argument("--config", default="offline", help="the base config (default: offline)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--grid", action="append", metavar="KEY=V1,V2,...", help=f"default: {DEFAULT_GRID}")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the runs (emptied first)")
    parser.add_argument(
        "--ray", nargs="?", const="local", help="run the sweep's points on Ray (see cast sweep)"
    )
    parser.add_argument("--ray-workers", type=int, default=1)
    parser.add_argument("--no-warm-up", action="store_true", help="skip the untimed first run")
    return parser.parse_args(argv)


def later_seconds(answers: Path) -> float:
    """The seconds a sweep point spent in its own stages, from its answers file's per-turn timings."""
    total = 0.0
    with answers.open(encoding="utf-8") as lines:
        for line in lines:
            timings = json.loads(line)["timings"]
            total += sum(timings.get(stage, 0.0) for stage in LATER_STAGES)
    return total


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    grid = args.grid or DEFAULT_GRID
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    common = ["--config", args.config, "--index", str(args.index), "--topics", str(args.topics)]
    for override in args.overrides:
        common += ["--set", override]
    cast = [sys.executable, "-m", "cast.cli"]
    if not args.no_warm_up:
        run_measured(
            [*cast, "run", *common, "--output", str(args.out / "warm")], args.out / "warm.log", "warm-up"
        )
    run_wall, run_cpu, _ = run_measured(
        [*cast, "run", *common, "--output", str(args.out / "full")], args.out / "run.log", "cast run"
    )
    sweep = [*cast, "sweep", *common, "--output", str(args.out / "sweep"), "--qrels", str(args.qrels)]
    for spec in grid:
        sweep += ["--grid", spec]
    if args.ray:
        sweep += ["--ray", args.ray, "--ray-workers", str(args.ray_workers)]
    sweep_wall, sweep_cpu, _ = run_measured(sweep, args.out / "sweep.log", "cast sweep")
    phases = dict(
        re.findall(r"^(shared pass|points|report): ([\d.]+) s$", (args.out / "sweep.log").read_text(), re.M)
    )
    points = sorted((args.out / "sweep").glob("*.answers.jsonl"))
    later = sum(later_seconds(p) for p in points)
    goal = run_wall + later
    print(
        f"topics: {args.topics.name}; config {args.config} {' '.join(args.overrides)}; grid {' x '.join(grid)}"
    )
    print("| what | wall s | CPU s |\n| --- | ---: | ---: |")
    print(f"| one full run (cast run) | {run_wall:.1f} | {run_cpu:.1f} |")
    print(f"| the sweep ({len(points)} points, cast sweep) | {sweep_wall:.1f} | {sweep_cpu:.1f} |")
    for phase, seconds in phases.items():
        print(f"| of which: {phase} | {float(seconds):.1f} | |")
    print(f"| the points' own stages ({', '.join(LATER_STAGES)}), summed | {later:.1f} | |")
    runs = sweep_wall - float(phases.get("report", 0.0))
    print(
        f"sweep / (one full run + the points' own stages) = {sweep_wall / goal:.2f}; without the report {runs / goal:.2f}"
    )
    print(f"sweep / {len(points)} full runs = {sweep_wall / (len(points) * run_wall):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
