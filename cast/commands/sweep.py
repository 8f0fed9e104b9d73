"""``cast sweep``: run a grid of settings over a topics file, one run per point, and compare the points."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from cast.commands.common import add_config_arguments, given_overrides
from cast.core.config import apply_overrides, load_profile, override_paths
from cast.errors import CastError
from cast.formats.topics import load_topics
from cast.infra.cluster import add_ray_arguments, ray_options
from cast.sweep import baseline_point, grid_points, run_sweep, sweep_report

log = logging.getLogger(__name__)


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=summary,
        description="Run every combination of the --grid values over a topics file: OUTPUT/<point>.run and "
        ".answers.jsonl per point, then OUTPUT/report.md (retrieval and answer measures, significance against the "
        "baseline point), its CSVs and OUTPUT/sweep.png. Where every swept setting belongs to a stage after "
        "re-ranking (selector, summarizer, knowledge_base, linker), retrieval and re-ranking run once for all "
        "points (OUTPUT/prepared.jsonl.gz). Run again, a sweep keeps its finished points; a sweep whose grid lacks "
        "points of the report in OUTPUT is refused (it would replace that report).",
    )
    add_config_arguments(parser)
    parser.add_argument("--topics", required=True, type=Path, help="a CAsT or iKAT topics file")
    parser.add_argument("--rewrites", help="a qid<TAB>rewrite TSV of manual rewrites (CAsT 2019)")
    parser.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="a setting and its values, e.g. --grid selector.gamma=0,0.25,0.5 (repeatable: every combination)",
    )
    parser.add_argument(
        "--output", required=True, type=Path, help="a folder for the points' files and the report"
    )
    parser.add_argument("--qrels", type=Path, help="TREC qrels: retrieval measures (and answer references)")
    parser.add_argument(
        "--baseline",
        help="the point the others are tested against, as the report names it (default: the first)",
    )
    parser.add_argument(
        "--correction", choices=("holm",), help="Holm-Bonferroni-correct the p-values over the points tested"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="run every point again, replacing its files (and a report of other points in OUTPUT)",
    )
    add_ray_arguments(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:

    points = grid_points(args.grid)
    baseline_point(points, args.baseline)  # a misspelt point fails now, not after the runs
    profile = load_profile(args.config)
    given = override_paths(given_overrides(args))  # each warned about once, not once per point
    axes = {path for point in points for path in override_paths(point.overrides)}
    for both in sorted(".".join(path) for path in axes & given.keys()):
        log.warning("%s is given twice (--set, then --grid): the grid's values hold", both)
    base = apply_overrides(profile, given)
    configs = {p.name: apply_overrides(profile, {**given, **override_paths(p.overrides)}) for p in points}
    conversations = load_topics(args.topics, rewrites=args.rewrites)
    if args.qrels is None and not any(t.response for c in conversations for t in c.turns):
        # Checked before the runs: the report is what a sweep is for.
        raise CastError(
            "give --qrels: the report compares the points, and these topics have no written responses"
        )
    outputs = run_sweep(
        points,
        lambda point: configs[point.name],
        base,
        conversations,
        args.output,
        ray=ray_options(args, base.get("device")),
        overwrite=args.overwrite,
    )
    shared = (
        f"sharing the turns prepared as far as {outputs.stop_after}"
        if outputs.stop_after
        else "each a full run"
    )
    print(f"ran {len(points)} points ({shared}) in {args.output}")
    started = time.perf_counter()
    report = sweep_report(
        points,
        outputs,
        args.output,
        qrels=args.qrels,
        topics=args.topics,
        index=base.get("index"),
        baseline=args.baseline,
        correction=args.correction,
    )
    print(f"report: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(f"wrote {report}")
    return 0
