"""The ``cast`` command line.

Each command lives in a module with ``add_parser(subparsers)``, which declares its arguments and sets ``func``.
Command modules import nothing heavy at module level, so ``cast --help`` is instant.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import traceback

from cast import __version__
from cast.errors import CastError

# One module per top-level command, in the order `cast --help` lists them.
COMMAND_MODULES = [
    "cast.commands.demo",
    "cast.commands.run",
    "cast.commands.sweep",
    "cast.commands.stages",
    "cast.commands.answer",
    "cast.commands.explore",
    "cast.commands.index",
    "cast.commands.entity",
    "cast.commands.evaluate",
    "cast.commands.explain",
    "cast.commands.summarize",
    "cast.commands.validate",
]


# Write errors that name no file but need no traceback: the disk (or the user's quota or file-size limit) is full.
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cast",
        description="Knowledge-driven answer generation for conversational search (TREC CAsT).",
    )
    parser.add_argument("--version", action="version", version=f"cast-toolkit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_parser(subparsers)
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
    parser = build_parser()
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
