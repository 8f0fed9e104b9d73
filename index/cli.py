"""``cast index``: build a Lucene index of a passage collection, and describe one."""

from __future__ import annotations

import argparse

from index.collections import FORMATS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="build or describe a Lucene index of a passage collection")
    commands = parser.add_subparsers(dest="index_command", metavar="{build,stats}", required=True)

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

    stats = commands.add_parser("stats", help="print an index's size and statistics")
    stats.add_argument("--index", required=True, metavar="DIR", help="the index directory")
    stats.set_defaults(func=stats_main)


def build_main(args: argparse.Namespace) -> int:
    from index.build import build_index

    summary = build_index(
        args.input,
        args.index,
        fmt=args.format,
        threads=args.threads,
        overwrite=args.overwrite,
        stemmer=args.stemmer,
        duplicates=args.duplicates,
    )
    print(
        f"indexed {summary.indexed:,} passages into {summary.path} ({summary.skipped:,} empty skipped) "
        f"in {summary.seconds:.1f} s: {summary.passages_per_second:,.0f} passages/s"
    )
    return 0


def stats_main(args: argparse.Namespace) -> int:
    from index.build import index_stats

    for name, value in index_stats(args.index).items():
        print(f"{name}: {value}")
    return 0
