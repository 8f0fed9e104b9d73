"""The ``cast`` command line.

Each command lives in a module with ``add_parser(subparsers, summary)``, which declares its arguments and sets
``func``. A command's module (and what it imports) is loaded only when that command runs: ``cast --help`` lists
the commands from :data:`COMMANDS` alone, so it is instant.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Collection

from cast import __version__
from cast.errors import CastError
from cast.infra.extras import MissingExtraError, require_extra

# Each top-level command: its module and its one-line summary, in the order `cast --help` lists them.
COMMANDS = {
    "demo": (
        "cast.commands.demo",
        "answer the bundled sample conversation (builds the sample index on first use)",
    ),
    "run": ("cast.commands.run", "run the pipeline over a topics file"),
    "sweep": ("cast.commands.sweep", "run a grid of settings and compare the points"),
    "stages": ("cast.commands.stages", "list the stages a config can name and their settings"),
    "answer": ("cast.commands.answer", "answer utterances of a conversation"),
    "explore": ("cast.commands.explore", "explore conversations turn by turn in a local web page"),
    "index": ("cast.commands.index", "build or describe a Lucene index of a passage collection"),
    "entity": ("cast.commands.entity", "build the entity dictionary; try entity linking and relatedness"),
    "eval": ("cast.commands.evaluate", "evaluate runs and answers; write reports"),
    "explain": ("cast.commands.explain", "draw a turn's entity graph from an answers file"),
    "calibrate": (
        "cast.commands.summarize",
        "calibrate a seq2seq summarizer's min_length to a target answer length",
    ),
    "validate": (
        "cast.commands.validate",
        "check a TREC iKAT run file (2023, 2024, 2025) or a TREC RAG 2024 answer file",
    ),
    "train": (
        "cast.commands.train",
        "train the models the toolkit ships (term selector, linker, sentence scorer)",
    ),
}


# The commands that need an optional part of the install (pyproject.toml's extras).
EXTRA_OF_COMMAND = {"explore": "explorer"}

# Write errors that name no file but need no traceback: the disk (or the user's quota or file-size limit) is full.
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command (``commands``: of those only; the others are listed by their summary, their
    modules not imported)."""
    parser = argparse.ArgumentParser(
        prog="cast",
        description="Knowledge-driven answer generation for conversational search (TREC CAsT).",
    )
    parser.add_argument("--version", action="version", version=f"cast-toolkit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if commands is None or name in commands:
            importlib.import_module(module).add_parser(subparsers, summary)
        else:
            subparsers.add_parser(name, help=summary)
    _accept_verbose_anywhere(parser)
    return parser


def _accept_verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let every (sub)command take ``-v`` too: users type it at the end (``cast run ... -v``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                if "-v" not in command._option_string_actions:
                    # SUPPRESS: a subcommand without -v must not reset the top-level flag to False.
                    command.add_argument(
                        "-v",
                        "--verbose",
                        action="store_true",
                        default=argparse.SUPPRESS,
                        help="log progress details",
                    )
                _accept_verbose_anywhere(command)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The command is the first word that is not an option (`cast -v run ...`): only its module is loaded.
    command = next((word for word in argv if not word.startswith("-")), "")
    if command in EXTRA_OF_COMMAND:  # before its module is loaded: it imports the extra's modules
        try:
            require_extra(EXTRA_OF_COMMAND[command], f"cast {command}")
        except MissingExtraError as e:
            print(f"cast {command}: error: {e}", file=sys.stderr)
            return 1
    parser = build_parser([command])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except BrokenPipeError:
        # The reader of our output went away (`cast eval ... | head`): stop quietly, as Unix tools do; point
        # stdout at /dev/null so that Python's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (CastError, OSError) as e:
        # A file-system error on a path (an output folder that is a file, a read-only place) is the user's to fix,
        # not a bug to trace; -v shows where it came from. Other OSErrors keep their traceback.
        if isinstance(e, OSError) and e.filename is None and e.errno not in _DISK_FULL:
            raise
        if args.verbose:
            traceback.print_exc()
        print(f"cast {args.command}: error: {_describe(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"cast {args.command}: interrupted", file=sys.stderr)
        return 130


def _describe(error: Exception) -> str:
    """The one-line message of an error: a CastError's own, or what an OSError did to which path."""
    if not isinstance(error, OSError):
        return str(error)
    if error.filename2 is not None:
        return f"cannot move {error.filename} to {error.filename2}: {error.strerror}"
    if error.filename is None:
        return f"{error.strerror} (free some space, then run the same command again)"
    if isinstance(error, FileExistsError):  # from mkdir(exist_ok=True): a file where a folder should be
        return f"{error.filename} is a file, so it cannot be used as a folder"
    return f"{error.filename}: {error.strerror}"


if __name__ == "__main__":
    sys.exit(main())
