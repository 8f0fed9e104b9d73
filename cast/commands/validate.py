"""``cast validate``: check a TREC iKAT run file or a TREC RAG 2024 answer file against its format's rules."""

from __future__ import annotations

import argparse

from cast.formats.ikat_runs import RUN_FORMATS, read_ikat_run, validate_ikat_run
from cast.formats.rag_runs import FORMAT as RAG_FORMAT
from cast.formats.rag_runs import read_rag24_run, validate_rag24_run
from cast.formats.topics import load_topics, read_rewrites


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "validate",
        help=summary,
        description="Check an iKAT run file against its year's schema and rules (see cast/formats/ikat_runs.py), or a TREC "
        "RAG 2024 answer file against the track's (cast/formats/rag_runs.py); with --topics, also that it answers every "
        "turn once. Prints each problem; exits 1 if there is any.",
    )
    parser.add_argument("run", help="the run file (.json; .jsonl for iKAT 2025 and TREC RAG 2024)")
    parser.add_argument("--format", required=True, choices=(*RUN_FORMATS, RAG_FORMAT))
    parser.add_argument(
        "--topics",
        help="the topics: a topics file (iKAT's for the iKAT formats), or for trec-rag24 also the track's "
        "topic_id<TAB>text file",
    )
    parser.add_argument(
        "--any-ids",
        action="store_true",
        help="trec-rag24: accept passage ids of any collection (a track submission cites MS MARCO v2.1 segments)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.format == RAG_FORMAT:
        problems = _rag24_problems(args)
    else:
        problems = _ikat_problems(args)
    for problem in problems:
        print(f"{args.run}: {problem}")
    if problems:
        print(f"{args.run}: {len(problems)} problem(s); not a valid {args.format} file")
        return 1
    print(f"{args.run}: a valid {args.format} file")
    return 0


def _ikat_problems(args: argparse.Namespace) -> list[str]:
    qids = None
    if args.topics:
        qids = [turn.qid for conversation in load_topics(args.topics) for turn in conversation.turns]
    return validate_ikat_run(read_ikat_run(args.run, args.format), args.format, qids)


def _rag24_problems(args: argparse.Namespace) -> list[str]:
    topics = None
    if args.topics and str(args.topics).endswith((".tsv", ".txt")):
        topics = read_rewrites(args.topics)  # the track's topics: topic_id<TAB>text, as a rewrites file
    elif args.topics:
        topics = {t.qid: t.utterance for c in load_topics(args.topics) for t in c.turns}
    return validate_rag24_run(read_rag24_run(args.run), topics, any_ids=args.any_ids)
