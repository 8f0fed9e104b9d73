"""``cast index``: build a Lucene index of a passage collection, precompute its passage embeddings, describe one."""

from __future__ import annotations

import argparse

from cast.core.config import load_config
from cast.errors import ConfigError
from cast.index.build import build_index, index_stats, merge_indexes
from cast.index.collections import FORMATS, collection_formats, read_duplicates
from cast.index.embeddings import RerankerEncoder, build_embeddings, store_path
from cast.index.record import build_record
from cast.infra import jvm
from cast.infra.cluster import add_ray_arguments, ray_options


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser("index", help=summary)
    commands = parser.add_subparsers(dest="index_command", metavar="{build,merge,embed,stats}", required=True)

    build = commands.add_parser(
        "build",
        help="index passage files (Krovetz stemming, positions, document vectors, raw text)",
        description="Index passage collections for first-stage retrieval. Formats: jsonl (Pyserini JSON lines, "
        "optionally .gz), msmarco (collection.tsv), car (TREC CAR paragraphs CBOR), wapo (Washington Post JSON "
        "lines, split into paragraphs). Without --format, each file's format is detected.",
    )
    build.add_argument(
        "--input", nargs="+", required=True, metavar="PATH", help="collection files or directories"
    )
    build.add_argument("--index", required=True, metavar="DIR", help="the index directory to create")
    build.add_argument("--format", choices=FORMATS, help="the input format (default: detected per file)")
    build.add_argument("--threads", type=int, default=2, help="indexing threads (default: 2)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing index at DIR")
    build.add_argument(
        "--duplicates", metavar="FILE", help="a CAsT duplicate list (docid:dup1,dup2,...) to drop"
    )
    build.add_argument(
        "--stemmer", default="krovetz", choices=("krovetz", "porter", "none"), help="(default: krovetz)"
    )
    build.set_defaults(func=build_main)

    merge = commands.add_parser(
        "merge",
        help="merge index shards built separately into one index",
        description="Merge indexes that `cast index build` made of parts of one collection (e.g. one per machine, "
        "side by side) into one index. Lucene copies the shards' segments; the merged index ranks exactly as one "
        "built from all the inputs at once.",
    )
    merge.add_argument(
        "--shards", nargs="+", required=True, metavar="DIR", help="the shard indexes, in order"
    )
    merge.add_argument("--index", required=True, metavar="DIR", help="the merged index directory to create")
    merge.add_argument("--overwrite", action="store_true", help="replace an existing index at DIR")
    merge.set_defaults(func=merge_main)

    embed = commands.add_parser(
        "embed",
        help="precompute the bi-encoder re-ranker's passage embeddings for an index",
        description="Embed every passage of the collection an index was built from with the config's bi-encoder "
        "re-ranker (its model, max_seq_length and with_title), into DIR.embeddings beside the index. The "
        "re-ranker then looks passages up there instead of encoding them per query. An interrupted run "
        "resumes where it stopped when started again with the same arguments.",
    )
    embed.add_argument("--index", required=True, metavar="DIR", help="the index whose passages are embedded")
    embed.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="PATH",
        help="the collection files the index was built from",
    )
    embed.add_argument("--format", choices=FORMATS, help="the input format (default: detected per file)")
    embed.add_argument(
        "--duplicates", metavar="FILE", help="the duplicate list the index was built with, if any"
    )
    embed.add_argument(
        "--config", default="offline", help="the config whose reranker settings are used (default: offline)"
    )
    embed.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set reranker.max_seq_length=128 (repeatable)",
    )
    embed.add_argument("--device", help="cpu or cuda (default: the config's device)")
    embed.add_argument("--batch-size", type=int, help="passages per forward pass (default: the config's)")
    embed.add_argument(
        "--chunk-size",
        type=int,
        default=2048,
        help="passages per saved part (the most an interruption loses)",
    )
    embed.add_argument("--overwrite", action="store_true", help="discard an existing store and start again")
    add_ray_arguments(embed)
    embed.set_defaults(func=embed_main)

    stats = commands.add_parser("stats", help="print an index's size and statistics")
    stats.add_argument("--index", required=True, metavar="DIR", help="the index directory")
    stats.set_defaults(func=stats_main)


def build_main(args: argparse.Namespace) -> int:

    summary = build_index(
        args.input,
        args.index,
        fmt=args.format,
        threads=args.threads,
        overwrite=args.overwrite,
        stemmer=args.stemmer,
        duplicates=args.duplicates,
    )
    # A duplicate list whose ids do not match the collection's (another prefix) leaves nothing out: say how many.
    listed = (
        ""
        if summary.duplicates_left_out is None
        else f", {summary.duplicates_left_out:,} listed duplicates left out"
    )
    print(
        f"indexed {summary.indexed:,} passages into {summary.path} ({summary.skipped:,} empty skipped{listed}) "
        f"in {summary.seconds:.1f} s: {summary.passages_per_second:,.0f} passages/s"
    )
    return 0


def merge_main(args: argparse.Namespace) -> int:

    summary = merge_indexes(args.shards, args.index, overwrite=args.overwrite)
    print(
        f"merged {len(args.shards)} shards ({summary.indexed:,} passages) into {summary.path} in "
        f"{summary.seconds:.1f} s"
    )
    return 0


def embed_main(args: argparse.Namespace) -> int:

    index_dir = jvm.check_index(args.index)
    collection_formats(args.input, args.format)  # a bad input fails before the model loads
    if args.duplicates:
        read_duplicates(args.duplicates)
    record = build_record(index_dir)  # (not the JVM's statistics: a running JVM would take Ctrl-C)
    config = load_config(args.config, [f"index={index_dir}", *args.overrides])
    if args.device:
        config["device"] = args.device
    section = config.get("reranker") or {}
    if section.get("name") != "biencoder":
        raise ConfigError(
            f"config {args.config!r} re-ranks with {section.get('name')!r}; passage embeddings are for the "
            "`biencoder` re-ranker (--set reranker.name=biencoder)"
        )
    # The encoder that builds the store reads none (a store being resumed would only be warned about).
    section = {**section, "embeddings": "none"}
    if args.batch_size:
        section["batch_size"] = args.batch_size
    ray = ray_options(args, config.get("device"))
    encoder = RerankerEncoder(config, section)
    # With Ray the workers encode; this process only reads the encoder's settings, on its CPU.
    reranker = (RerankerEncoder({**config, "device": "cpu"}, section) if ray else encoder).reranker
    summary = build_embeddings(
        args.input,
        store_path(index_dir),
        reranker.embedding_settings,
        encoder,
        reranker.embedding_dimension,
        fmt=args.format,
        duplicates=args.duplicates,
        index_documents=record["documents"] if record else None,
        chunk_size=args.chunk_size,
        overwrite=args.overwrite,
        ray=ray,
    )
    resumed = f" (after {summary.resumed:,} embedded by an earlier run)" if summary.resumed else ""
    print(
        f"embedded {summary.embedded:,} passages{resumed} into {summary.path}: {summary.count:,} in all, "
        f"{summary.seconds:.1f} s, {summary.passages_per_second:,.1f} passages/s"
    )
    return 0


def stats_main(args: argparse.Namespace) -> int:

    for name, value in index_stats(args.index).items():
        print(f"{name}: {value}")
    return 0
