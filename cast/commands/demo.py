"""``cast demo``: index the bundled sample collection (once) and answer the sample conversation turn by turn."""

from __future__ import annotations

import argparse
from pathlib import Path

from cast.commands.answer import format_result
from cast.commands.common import add_set_argument
from cast.conversation.walker import answer_conversations
from cast.core.config import load_config
from cast.core.pipeline import Pipeline
from cast.core.records import TurnResult
from cast.entity.builders.collection_entities import build_entity_resources
from cast.entity.builders.kb import DEFAULT_KB, build_kb
from cast.formats.topics import load_topics
from cast.index.build import build_index
from cast.infra.atomic import write_text_atomic

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "data" / "sample"
SAMPLE_PASSAGES = SAMPLE_DIR / "passages.jsonl.gz"
SAMPLE_CONVERSATION = SAMPLE_DIR / "conversation.json"


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "demo",
        help=summary,
        description="Builds an index of the bundled Wikipedia sample into the cache directory (and the wikipedia "
        "linker's knowledge base, `cast entity kb`) on first use, then answers the sample conversation turn by "
        "turn with the offline profile as it is: each utterance rewritten by the profile's rewriter, then "
        "answered.",
    )
    parser.add_argument("--config", default="offline", help="config name or YAML path (default: offline)")
    add_set_argument(parser)
    parser.add_argument(
        "--manual",
        action="store_true",
        help="show each turn's manual rewrite under the system's, for comparison",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="rebuild the sample index and entity resources"
    )
    parser.set_defaults(func=main)


def demo_index(cache_dir: Path, rebuild: bool = False) -> Path:
    """The sample collection's index and entity resources, built on first use and when the sample changes."""
    import hashlib

    index_dir = cache_dir / "indexes" / "demo"
    # Written after both builds: an interrupted build, or a newer sample, is rebuilt next time.
    stamp = index_dir.with_name("demo.sample-sha256")
    digest = hashlib.sha256(SAMPLE_PASSAGES.read_bytes()).hexdigest()
    if rebuild or not stamp.is_file() or stamp.read_text() != digest:
        print(f"building the sample index at {index_dir} (first use only)")
        build_index([SAMPLE_PASSAGES], index_dir, overwrite=True)
        build_entity_resources(index_dir, [SAMPLE_PASSAGES])
        write_text_atomic(stamp, digest)
    return index_dir


def demo_kb(linker: dict) -> None:
    """The Wikipedia knowledge base the configured linker reads, built on first use (about 20 s)."""

    if linker.get("name") != "wikipedia":
        return
    path = Path(linker.get("kb_path") or DEFAULT_KB).expanduser()
    if not path.is_file():
        print(f"building the Wikipedia knowledge base at {path} (first use only, about 20 s)")
        build_kb(path)


def main(args: argparse.Namespace) -> int:

    config = load_config(args.config, args.overrides)
    index_dir = demo_index(Path(config.get("cache_dir", "~/.cache/cast-toolkit")).expanduser(), args.rebuild)
    config["index"] = str(index_dir)
    demo_kb(config["linker"])
    pipeline = Pipeline.from_config(config, progress=True)
    print(
        f"rewriter: {config['rewriter']['name']}, re-ranker: {config['reranker']['name']}, "
        f"selector: {config['selector']['name']}, answers: {config['summarizer']['name']}"
    )

    def show(result: TurnResult) -> None:
        print(f"\nQ{result.turn.turn_id}: {result.turn.utterance}")
        manual = (result.turn.manual_rewrite or "(none)") if args.manual else None
        print(format_result(result, manual))

    for conversation in load_topics(SAMPLE_CONVERSATION):
        print(f"# {conversation.title or conversation.topic_id}")
        answer_conversations(pipeline, [conversation], on_result=show)
    return 0
