"""``cast explore``: the Conversation Explorer, a local web page over the pipeline."""

from __future__ import annotations

import argparse
from pathlib import Path

from cast.commands.common import add_config_arguments, config_from_args
from cast.explore import DEFAULT_MAX_PENDING, DEFAULT_TIME_LIMIT


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explore",
        help="explore conversations turn by turn in a local web page",
        description="Starts a web page on http://127.0.0.1:PORT/ where you pick a conversation (or type one), "
        "step through its turns and see the rewrite, the ranked and chosen passages, the entity graph and the "
        "answer; changing the method, γ, τ, the re-ranker or the generator recomputes the turn. Without "
        "--topics the bundled sample conversation is offered, and the sample index is used (built on first "
        "use) unless --index or the config names another.",
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--topics", help="a topics file (CAsT JSON or a sample conversation; default: the sample)"
    )
    parser.add_argument("--qrels", help="TREC qrels, to show each judged turn's nDCG and passage grades")
    parser.add_argument("--port", type=int, default=8000, help="the port on 127.0.0.1 (default: 8000)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT,
        help=f"seconds a request may take before it is stopped (default: {DEFAULT_TIME_LIMIT:g})",
    )
    parser.add_argument(
        "--max-pending",
        type=int,
        default=DEFAULT_MAX_PENDING,
        help="turns answered or queued at once; requests for more get 503 with Retry-After "
        f"(default: {DEFAULT_MAX_PENDING})",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from cast.extras import require_extra

    require_extra("explorer", "cast explore")
    from cast.commands.demo import SAMPLE_CONVERSATION, demo_index
    from cast.errors import CastError
    from cast.explore.api import create_app
    from cast.explore.engine import Explorer
    from cast.explore.server import HOST, serve
    from cast.topics import load_topics, read_qrels

    config = config_from_args(args)
    if not args.index and uses_demo_index(config):
        config["index"] = str(demo_index(cache_dir(config)))
    conversations = load_topics(args.topics or SAMPLE_CONVERSATION)
    qrels = read_qrels(args.qrels) if args.qrels else None
    if args.max_pending < 1:
        raise CastError(f"--max-pending must be at least 1, got {args.max_pending}")
    explorer = Explorer(
        config, conversations, qrels, time_limit=args.time_limit, max_pending=args.max_pending
    )
    print(f"loading the stages of {config.get('tag')} over {config['index']} ...", flush=True)
    explorer.warm_up()
    print(f"Conversation Explorer: http://{HOST}:{args.port}/  (Ctrl-C stops it)", flush=True)
    try:
        serve(create_app(explorer), args.port)
    finally:
        explorer.close()
    return 0


def cache_dir(config: dict) -> Path:
    return Path(config.get("cache_dir", "~/.cache/cast-toolkit")).expanduser()


def uses_demo_index(config: dict) -> bool:
    """Whether the config names no index, or the sample index's place in the cache (built on first use)."""
    index = config.get("index")
    return not index or Path(index).expanduser() == cache_dir(config) / "indexes" / "demo"
