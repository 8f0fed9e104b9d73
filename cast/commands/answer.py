"""``cast answer``: answer a conversation turn by turn, interactively or for one utterance with its history."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator

from cast.commands.common import add_config_arguments, config_from_args
from cast.conversation.session import Session
from cast.core.pipeline import Pipeline
from cast.errors import CastError, DataFormatError, EmptyUtteranceError
from cast.formats.textfiles import TYPED_LINE_BYTES, bounded_lines, decode_text

NEW_CONVERSATION = "/new"
QUIT = "/quit"


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "answer",
        help=summary,
        description="Without UTTERANCE, read utterances from standard input, one per line, each the next turn of "
        f"the same conversation ({NEW_CONVERSATION} starts a new conversation, {QUIT} or end of input stops). "
        "With UTTERANCE, answer it once, after the --history utterances.",
    )
    add_config_arguments(parser)
    parser.add_argument("utterance", nargs="?", help="the utterance to answer")
    parser.add_argument(
        "--history",
        action="extend",
        nargs="+",
        default=[],
        metavar="UTTERANCE",
        help="the earlier utterances of the conversation, in order",
    )
    parser.add_argument("--json", action="store_true", help="print each turn's full record as JSON")
    parser.set_defaults(func=main)


def format_result(result, manual_rewrite: str | None = None) -> str:
    """The query the utterance was rewritten to (above a manual rewrite of it, where given), the answer, and the
    passages it used (ids and titles)."""
    lines = [f"  rewrite: {result.rewrite.query}"]
    if manual_rewrite is not None:
        lines.append(f"  manual:  {manual_rewrite}")
    lines.append(result.answer.text)
    for scored in result.selection.passages:
        title = f" {scored.passage.title}" if scored.passage.title else ""
        lines.append(f"  [{scored.id}]{title}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:

    _check_utterances(args.history, args.utterance)
    config = config_from_args(args)
    lines: Iterator[tuple[int, bytes]] = iter(())
    if args.utterance is None:
        prompt = (lambda: print("> ", end="", file=sys.stderr, flush=True)) if sys.stdin.isatty() else None
        lines = bounded_lines(sys.stdin.buffer, TYPED_LINE_BYTES, "standard input", prompt)
        if prompt is None:  # piped: its first line is read (and a wrong one refused) before the models load
            lines = itertools.chain(list(itertools.islice(lines, 1)), lines)
    pipeline = Pipeline.from_config(config)

    def show(result) -> None:
        print(
            json.dumps(result.to_record(), ensure_ascii=False) if args.json else format_result(result),
            flush=True,
        )

    conversation = Session.typed(pipeline)
    if args.utterance is not None:
        for earlier in args.history:
            conversation.ask(earlier)
        show(conversation.ask(args.utterance))
        return 0
    conversation_number = 1
    for number, raw in lines:
        try:
            utterance = decode_text(raw, "standard input", number).strip()
        except DataFormatError as e:  # one mistyped line must not end the session
            print(f"(line {number}: {e.problem.partition('; ')[0]}; type it again)", file=sys.stderr)
            continue
        if utterance == QUIT:
            break
        if utterance == NEW_CONVERSATION:
            conversation_number += 1
            conversation = Session.typed(pipeline, topic_id=f"user{conversation_number}")
            print("(new conversation)", file=sys.stderr)
            continue
        try:
            show(conversation.ask(utterance))
        except EmptyUtteranceError:
            print("(empty utterance: type a question, /new or /quit)", file=sys.stderr)
    return 0


def _check_utterances(history: list[str], utterance: str | None) -> None:
    """Refuse what cannot be answered before the models load (seconds), naming the argument to fix."""

    if utterance is None and history:
        # argparse gives --history every word after it: `--history A B` leaves no UTTERANCE, and the command
        # would silently wait for standard input instead.
        raise CastError(
            "--history takes every utterance that follows it, so no UTTERANCE is left to answer: put `--` before "
            "it, e.g. cast answer --history 'Tell me about Glasgow.' -- 'Which river flows through it?'"
        )
    if utterance is not None and not utterance.strip():
        raise EmptyUtteranceError("UTTERANCE is empty: give the question to answer")
    for position, earlier in enumerate(history, start=1):
        if not earlier.strip():
            raise EmptyUtteranceError(
                f"--history utterance {position} is empty: give its text or leave it out"
            )
