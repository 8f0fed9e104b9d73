"""``cast stages``: every stage a config can name, with its settings as the stage declares them."""

from __future__ import annotations

import argparse

from cast.core.registry import STAGES, stage_class
from cast.core.settings import REQUIRED
from cast.core.stages import Stage
from cast.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "stages",
        help=summary,
        description="Each stage's settings as its class declares them (cast/core/settings.py): type, default, limits, "
        "and whether a run may resume under another value (runtime). Set them in a config section or with "
        "--set KIND.SETTING=VALUE.",
    )
    parser.add_argument(
        "kind", nargs="?", help="only this kind (rewriter, first_stage, reranker, linker, ...)"
    )
    parser.add_argument("name", nargs="?", help="only this stage of the kind")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:

    if args.kind is not None and args.kind not in STAGES:
        raise ConfigError(f"unknown stage kind {args.kind!r}; known kinds: {', '.join(STAGES)}")
    if args.name is not None and args.name not in STAGES[args.kind]:
        raise ConfigError(
            f"unknown {args.kind} {args.name!r}; choose one of: {', '.join(sorted(STAGES[args.kind]))}"
        )
    kinds = [args.kind] if args.kind else list(STAGES)
    for kind in kinds:
        names = [args.name] if args.name else list(STAGES.get(kind, {}))
        for name in names:
            try:
                cls = stage_class(kind, name)
            except ImportError as e:  # a stage whose packages are not installed here
                print(f"{kind} {name}: cannot be loaded here ({e})\n")
                continue
            print(describe_stage(kind, name, cls))
    return 0


def describe_stage(kind: str, name: str, cls: type[Stage]) -> str:
    """A stage's heading and one line per setting: name, type, default, limits, runtime, doc."""

    summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    lines = [f"{kind} {name}: {summary}"]
    settings = cls.settings()
    if not settings:
        lines.append("  (no settings)")
    for setting in settings.values():
        default = "required" if setting.default is REQUIRED else f"= {setting.default!r}"
        notes = ", ".join(filter(None, [setting.limits, "runtime" if setting.runtime else ""]))
        lines.append(f"  {setting.name}: {setting.type} {default}{f' ({notes})' if notes else ''}")
        if setting.doc:
            lines.append(f"      {setting.doc}")
    return "\n".join(lines) + "\n"
