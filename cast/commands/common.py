"""Arguments and set-up shared by the commands that run the pipeline."""

from __future__ import annotations

import argparse
from typing import Any


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default="offline", help="a config name under configs/ or a YAML path (default: offline)"
    )
    parser.add_argument("--index", help="the Lucene index (overrides the config's `index`)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set first_stage.mu=1500 (repeatable)",
    )


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from cast.config import load_config

    overrides = list(args.overrides)
    if args.index:
        overrides.insert(0, f"index={args.index}")
    return load_config(args.config, overrides)
