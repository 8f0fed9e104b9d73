"""``cast demo``: index the bundled sample collection (once) and answer the sample conversation turn by turn."""

from __future__ import annotations

import argparse
from pathlib import Path

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "data" / "sample"
SAMPLE_PASSAGES = SAMPLE_DIR / "passages.jsonl.gz"
SAMPLE_CONVERSATION = SAMPLE_DIR / "conversation.json"
# The sample is too small for HQE's idf thresholds (tuned on an 820k-passage collection), so the demo reads the
# conversation's manual rewrites; --set rewriter.name=hqe shows automatic rewriting instead.
DEMO_OVERRIDES = ["rewriter.name=manual", "rewriter.fallback=hqe"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="answer the bundled sample conversation (builds the sample index on first use)",
        description="Builds an index of the bundled Wikipedia sample into the cache directory (and the wikipedia "
        "linker's knowledge base, `cast entity kb`) on first use, then "
        "answers the sample conversation turn by turn with the offline profile (reading the conversation's "
        "manual rewrites unless --set rewriter.name=... says otherwise).",
    )
    parser.add_argument("--config", default="offline", help="config name or YAML path (default: offline)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--rebuild", action="store_true", help="rebuild the sample index and entity resources"
    )
    parser.set_defaults(func=main)


def demo_index(cache_dir: Path, rebuild: bool = False) -> Path:
    """The sample collection's index and entity resources, built on first use and when the sample changes."""
    import hashlib

    from cast.atomic import write_text_atomic
    from entity.collection_entities import build_entity_resources
    from index.build import build_index

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
    from entity.kb import DEFAULT_KB, build_kb

    if linker.get("name") != "wikipedia":
        return
    path = Path(linker.get("kb_path") or DEFAULT_KB).expanduser()
    if not path.is_file():
        print(f"building the Wikipedia knowledge base at {path} (first use only, about 20 s)")
        build_kb(path)


def main(args: argparse.Namespace) -> int:
    from cast.commands.answer import format_result
    from cast.config import load_config
    from cast.pipeline import Pipeline
    from cast.session import Session
    from cast.topics import load_topics

    config = load_config(args.config, DEMO_OVERRIDES + args.overrides)
    index_dir = demo_index(Path(config.get("cache_dir", "~/.cache/cast-toolkit")).expanduser(), args.rebuild)
    config["index"] = str(index_dir)
    demo_kb(config["linker"])
    pipeline = Pipeline.from_config(config, progress=True)
    print(
        f"rewriter: {config['rewriter']['name']}, re-ranker: {config['reranker']['name']}, "
        f"selector: {config['selector']['name']}, answers: {config['summarizer']['name']}"
    )
    for conversation in load_topics(SAMPLE_CONVERSATION):
        session = Session(pipeline, conversation)
        print(f"# {conversation.title or conversation.topic_id}")
        for turn in conversation.turns:
            result = session.answer(turn)
            print(f"\nQ{turn.turn_id}: {turn.utterance}")
            print(format_result(result))
    return 0
