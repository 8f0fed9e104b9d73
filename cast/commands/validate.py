"""``cast validate``: check a TREC iKAT run file against its year's schema and rules."""

from __future__ import annotations

import argparse

from cast.formats.ikat_runs import read_ikat_run, validate_ikat_run
from cast.formats.topics import load_topics


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "validate",
        help=summary,
        description="Check an iKAT run file against its year's schema and rules (see cast/formats/ikat_runs.py); with "
        "--topics, also that it answers every turn once. Prints each problem; exits 1 if there is any.",
    )
    parser.add_argument("run", help="the run file (.json; .jsonl for 2025)")
    parser.add_argument("--format", required=True, choices=("ikat2023", "ikat2024", "ikat2025"))
    parser.add_argument("--topics", help="the year's iKAT topics file")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:

    qids = None
    if args.topics:
        qids = [turn.qid for conversation in load_topics(args.topics) for turn in conversation.turns]
    problems = validate_ikat_run(read_ikat_run(args.run, args.format), args.format, qids)
    for problem in problems:
        print(f"{args.run}: {problem}")
    if problems:
        print(f"{args.run}: {len(problems)} problem(s); not a valid {args.format} run")
        return 1
    print(f"{args.run}: a valid {args.format} run")
    return 0
