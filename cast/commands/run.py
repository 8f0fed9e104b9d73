"""``cast run``: answer every turn of a topics file; write a TREC run file and an answers file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cast.commands.common import add_config_arguments, config_from_args
from cast.conversation.prepared import Prepared
from cast.conversation.runner import Runner, open_runner
from cast.core.pipeline import STOP_POINTS
from cast.core.records import Conversation
from cast.errors import CastError
from cast.formats.ikat_runs import RUN_FORMATS, ikat_run_path, write_ikat_run
from cast.formats.outputs import RunOutputs, write_outputs
from cast.formats.rag_runs import FORMAT as RAG_FORMAT
from cast.formats.rag_runs import MSMARCO_SEGMENT_ID, rag24_run_path, read_rag24_run, write_rag24_run
from cast.formats.topics import load_topics, topics_digest
from cast.infra.atomic import check_writable
from cast.infra.cluster import add_ray_arguments, ray_options


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "run",
        help=summary,
        description="Answer every turn of a topics file. Writes OUTPUT.run (TREC format) and OUTPUT.answers.jsonl; "
        "an interrupted run resumes from the last completed turn.",
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--topics",
        required=True,
        metavar="FILE|irds:ID",
        help="the conversations: a TREC CAsT topics file (2019, 2020, 2021 JSON; 2022's flattened JSON, one path "
        "a conversation), a TREC iKAT topics file (2023, 2024, 2025 JSON, with each user's PTKB), a sample "
        "conversation (JSON: {topic_id, turns: [{utterance}]}), or irds:ID, an ir_datasets id (the irds extra; "
        "irds:trec-cast/v1/2019, irds:trec-cast/v1/2020, irds:trec-cast/v0/train; offline, its files under "
        "IR_DATASETS_HOME, as docs/ecosystem.md lists)",
    )
    parser.add_argument("--rewrites", help="a qid<TAB>rewrite TSV of manual rewrites (CAsT 2019)")
    parser.add_argument("--output", help="output prefix, e.g. runs/lmd-eg (required unless --stop-after)")
    parser.add_argument("--tag", help="the run tag (default: the config's name)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace complete outputs that already exist"
    )
    staged = parser.add_argument_group(
        "stopping early, finishing later",
        "Take every turn only as far as re-ranking (or entity linking) once, then run the later stages (selection, "
        "answers) under other settings from the saved turns: `cast run --stop-after link --prepared P.jsonl.gz`, "
        "then `cast run --prepared P.jsonl.gz --set selector.gamma=0.5 --output runs/eg-.5`.",
    )
    staged.add_argument(
        "--stop-after",
        choices=STOP_POINTS,
        help="stop after this stage and write the prepared turns to --prepared (no run or answers file)",
    )
    staged.add_argument(
        "--prepared",
        metavar="FILE",
        help="with --stop-after: where to write the prepared turns; without: prepared turns to finish (the "
        "config's stages up to where they stopped must be those that prepared them)",
    )
    ikat = parser.add_argument_group("TREC run files: iKAT, RAG")
    ikat.add_argument(
        "--format",
        choices=(*RUN_FORMATS, RAG_FORMAT),
        help="also write the iKAT run file of that year (OUTPUT.ikat2023.json, ...; 2025: .jsonl), or the TREC RAG "
        "2024 answer file (OUTPUT.trec-rag24.jsonl: a line per turn, its answer's sentences citing its ranking)",
    )
    ikat.add_argument("--run-type", default="automatic", help="the iKAT run type (default: automatic)")
    ikat.add_argument("--team-id", default="", help="the team id (iKAT 2025 metadata)")
    add_ray_arguments(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.stop_after and not args.prepared:
        raise CastError("--stop-after needs --prepared FILE: where to write the prepared turns")
    if not args.stop_after and not args.output:
        raise CastError(
            "give --output (a prefix for the run and answers files), or --stop-after with --prepared"
        )
    if args.stop_after:
        check_writable(args.prepared, "--prepared")  # now, not after every turn is prepared
    config = config_from_args(args)
    conversations = load_topics(args.topics, rewrites=args.rewrites)
    if args.format in RUN_FORMATS and not any(c.ptkb for c in conversations):
        # Its passage ids would not be ClueWeb22's: a submission file that the organisers would refuse.
        raise CastError(
            f"--format {args.format} writes a TREC iKAT run, but {args.topics} are not iKAT topics (no PTKB); "
            "leave --format out"
        )
    ray = ray_options(args, config.get("device"))
    if args.stop_after:
        with open_runner(config, ray) as runner:
            prepared = runner.prepare(conversations, stop_after=args.stop_after, progress=True)
            # Later stages read the candidates' texts; below them a run file needs only ids and scores.
            prepared.compact(max(runner.candidates, 1)).save(args.prepared)
        print(f"wrote {args.prepared} ({len(prepared.turns)} turns prepared as far as {args.stop_after})")
        return 0
    finishing = Prepared.load(args.prepared) if args.prepared else None
    outputs = RunOutputs(args.output, args.tag or config["tag"], overwrite=args.overwrite)
    with outputs.locked(), open_runner(config, ray) as runner:
        return _run(args, config, conversations, outputs, runner, finishing)


def _run(
    args: argparse.Namespace,
    config: dict,
    conversations: list[Conversation],
    outputs: RunOutputs,
    runner: Runner,
    prepared: Prepared | None,
) -> int:
    qids = write_outputs(
        outputs,
        {**runner.describe(), "topics": topics_digest(conversations)},
        conversations,
        lambda done, write: runner.run(
            conversations, done=done, on_result=write, progress=True, prepared=prepared
        ),
        overwrite=args.overwrite,
    )
    linker_report = runner.linker_report()
    if linker_report:
        print(linker_report, file=sys.stderr)
    print(f"wrote {outputs.run_path} and {outputs.answers_path} ({len(qids)} turns)")
    if args.format in RUN_FORMATS:
        _write_ikat(args, outputs, args.tag or config["tag"])
    elif args.format == RAG_FORMAT:
        _write_rag24(args, outputs, args.tag or config["tag"])
    return 0


def _write_ikat(args: argparse.Namespace, outputs: RunOutputs, run_name: str) -> None:
    path = ikat_run_path(args.output, args.format)
    problems = write_ikat_run(
        path, outputs.run_path, outputs.answers_path, args.format, run_name, args.run_type, args.team_id
    )
    _report_written(path, problems, args.format, outputs)


def _write_rag24(args: argparse.Namespace, outputs: RunOutputs, run_id: str) -> None:
    path = rag24_run_path(args.output)
    problems = write_rag24_run(path, outputs.run_path, outputs.answers_path, run_id)
    _report_written(path, problems, args.format, outputs)
    other = {
        r
        for entry in read_rag24_run(path)
        for r in entry["references"]
        if not MSMARCO_SEGMENT_ID.fullmatch(r)
    }
    if other:
        print(
            f"note: {len(other)} passage ids of {path} are not MS MARCO v2.1 segment ids (e.g. {min(other)}): fine "
            "for tools that read the format, not a TREC RAG 2024 submission",
            file=sys.stderr,
        )


def _report_written(path: Path, problems: list[str], fmt: str, outputs: RunOutputs) -> None:
    """Say that ``path`` was written, or (with ``problems``) why it was not: no file that looks like a
    submission (e.g. a turn that retrieved nothing)."""
    if problems:
        for problem in problems[:5]:
            print(f"{path}: {problem}", file=sys.stderr)
        raise CastError(
            f"not writing {path}: it would not be a valid {fmt} file ({len(problems)} problem(s), above); "
            f"{outputs.run_path} and {outputs.answers_path} are complete"
        )
    print(f"wrote {path}")
