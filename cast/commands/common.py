"""Arguments and set-up shared by the commands that run the pipeline."""

from __future__ import annotations

import argparse
from typing import Any

from cast.core.config import load_config


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default="offline", help="a config name under configs/ or a YAML path (default: offline)"
    )
    parser.add_argument("--index", help="the Lucene index (overrides the config's `index`)")
    add_set_argument(parser)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable), applied by the rule of :mod:`cast.core.config`."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set first_stage.mu=1500 or --set rewriter.name=hqe (repeatable)",
    )


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config ``--config``, ``--index`` and ``--set`` give."""
    return load_config(args.config, given_overrides(args))


def given_overrides(args: argparse.Namespace) -> list[str]:
    """``--index`` and the ``--set`` options, as ``--set`` values."""
    return [*([f"index={args.index}"] if args.index else []), *args.overrides]
