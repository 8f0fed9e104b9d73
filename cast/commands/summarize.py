"""``cast calibrate``: choose a seq2seq summarizer's ``min_length`` so that its answers average a target length."""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.commands.common import add_config_arguments, config_from_args
from cast.conversation.walker import answer_conversations
from cast.core.config import config_path
from cast.core.pipeline import Pipeline
from cast.core.records import Selection, from_dict
from cast.core.registry import build_stage
from cast.errors import CastError, ConfigError, DataFormatError
from cast.formats.textfiles import json_lines
from cast.formats.topics import load_topics
from cast.infra.atomic import write_text_atomic
from cast.infra.resources import Resources
from cast.infra.text import count_words
from cast.summarize import calibration as cal
from cast.summarize.calibration import parse_grid
from cast.summarize.seq2seq import Seq2SeqSummarizer


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help=summary,
        description="Sweep the summarizer's min_length on a sample of turns and keep the value whose answers "
        "average --target-words words (the paper's Figure 2). The passages come from running the config's "
        "pipeline on --topics, or from the selections of an earlier run (--answers). Writes a config that stores "
        "the chosen min_length, a TSV table and a PNG plot of words against min_length.",
    )
    add_config_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topics", help="a CAsT topics file: the pipeline selects the passages of its turns")
    source.add_argument(
        "--answers", help="an answers file of an earlier `cast run` (its selections are reused)"
    )
    parser.add_argument("--rewrites", help="a qid<TAB>rewrite TSV of manual rewrites (with --topics)")
    parser.add_argument("--target-words", type=float, required=True, help="the wanted average words (50, 70)")
    parser.add_argument("--sample", type=int, default=50, help="turns to calibrate on (default: 50; 0 = all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the turn sample (default: 0)")
    parser.add_argument(
        "--min-lengths", default="0:150:10", help="grid START:STOP:STEP or a list a,b,c (default: 0:150:10)"
    )
    parser.add_argument("--no-refine", action="store_true", help="keep to the grid (no bisection)")
    parser.add_argument(
        "--output",
        help="the config to write (default: CONFIG-<target>w.yaml beside the config; the config itself updates it)",
    )
    parser.add_argument(
        "--report-dir",
        default="runs/calibration",
        help="where the table (.tsv) and plot (.png) go (default: runs/calibration)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:

    grid = checked_grid(args)
    config = config_from_args(args)
    section = config.get("summarizer") or {}
    if section.get("name") != "seq2seq":
        raise ConfigError(
            f"calibration needs the seq2seq summarizer, but the config's summarizer is {section.get('name')!r}; "
            "use --config paper or --set summarizer.name=seq2seq --set summarizer.model=..."
        )
    # Turns whose passages have no text get no answer at any length: they say nothing about length.
    usable = [(q, s) for q, s in _load_items(args, config) if any(p.passage.text.strip() for p in s.passages)]
    items = sample_items(usable, args.sample, args.seed)
    if not items:
        raise CastError("no turn has selected passages with text to calibrate on")

    summarizer = build_stage("summarizer", section, Resources(config))
    assert isinstance(summarizer, Seq2SeqSummarizer)  # the section names seq2seq (checked above)

    def average_words_at(min_length: int) -> float:
        answers = summarizer.with_min_length(min_length).summarize_batch(items)
        average = sum(0 if a.no_answer_reason else count_words(a.text) for a in answers) / len(answers)
        print(f"min_length {min_length:>4}: {average:.1f} words", file=sys.stderr)
        return average

    result = cal.calibrate_min_length(average_words_at, args.target_words, grid, refine=not args.no_refine)
    print(cal.format_table(result))

    source = config_path(args.config)
    target = f"{args.target_words:g}w"
    output = Path(args.output) if args.output else source.with_name(f"{source.stem}-{target}.yaml")
    what = f"{len(items)} turns of {args.topics or args.answers} (seed {args.seed}), model {section.get('model')}"
    write_text_atomic(output, cal.calibrated_config(source, output, section, result, what))
    slug = f"{Path(str(section.get('model', 'model'))).name}-{target}"
    report_dir = Path(args.report_dir)
    cal.write_table(result, report_dir / f"{slug}.tsv")
    cal.plot(result, report_dir / f"{slug}.png", f"{section.get('model')}: words vs min_length")
    print(f"wrote {output}, {report_dir / slug}.tsv and {report_dir / slug}.png")
    return 0


def checked_grid(args: argparse.Namespace) -> list[int]:
    """The ``--min-lengths`` grid, once the numeric arguments are checked (before any model or index loads)."""
    import math

    if not (math.isfinite(args.target_words) and args.target_words > 0):
        raise ConfigError(f"--target-words must be a positive number of words, got {args.target_words:g}")
    if args.sample < 0:
        raise ConfigError(f"--sample must be 0 (all turns) or more, got {args.sample}")
    grid = parse_grid(args.min_lengths)
    if not grid or min(grid) < 0:
        raise ConfigError(f"--min-lengths must give lengths of 0 or more, got {args.min_lengths!r}")
    return grid


def _load_items(args: argparse.Namespace, config: dict[str, Any]) -> list[tuple[str, Any]]:
    """(query, selection) of every turn, from an answers file or by running the pipeline up to selection."""
    if args.answers:
        return read_selections(Path(args.answers))

    conversations = load_topics(args.topics, rewrites=args.rewrites)
    # The passages are what is calibrated on; a cheap summarizer stands in for the one being calibrated.
    selecting = {**config, "summarizer": {"name": "topk_trim"}}
    results = answer_conversations(Pipeline.from_config(selecting), conversations, progress=True)
    return [(r.rewrite.answer_question, r.selection) for r in results]


def read_selections(path: Path) -> list[tuple[str, Any]]:
    """(query, selection) of each record of an answers file (``cast run``'s ``*.answers.jsonl``)."""

    if not path.is_file():
        raise DataFormatError(path, "no such answers file")
    items = []
    for number, record in json_lines(path):
        try:
            items.append((record["query"], from_dict(Selection, record["selection"])))
        except (KeyError, TypeError) as e:
            raise DataFormatError(
                path, f"not an answers record with a query and a selection ({e})", number
            ) from e
    if not items:
        raise DataFormatError(path, "the answers file has no records")
    return items


def sample_items(items: Sequence[Any], size: int, seed: int) -> list[Any]:
    """``size`` items drawn without replacement with ``seed`` (all of them when ``size`` is 0 or too large)."""
    if not size or size >= len(items):
        return list(items)
    return random.Random(seed).sample(list(items), size)
