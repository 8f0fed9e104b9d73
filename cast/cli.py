"""The ``cast`` command line.

Each command lives in a module with ``add_parser(subparsers)``, which declares its arguments and sets ``func``.
Command modules import nothing heavy at module level, so ``cast --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from cast import __version__
from cast.errors import CastError

# One module per top-level command, in the order `cast --help` lists them.
COMMAND_MODULES = [
    "cast.commands.demo",
    "cast.commands.run",
    "cast.commands.answer",
    "cast.commands.explore",
    "index.cli",
    "entity.cli",
    "cast.evaluate.cli",
    "entity.explain",
    "summarize.cli",
]


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
    return parser


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
    except CastError as e:
        print(f"cast {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"cast {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
