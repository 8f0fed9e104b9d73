"""Headings glued to the sentences of a collection: what the extractive answers keep of each sentence once the
well-formedness reader (:meth:`cast.infra.wellformed.FormReader.repair`) cuts off what is glued in front of it, per
source file: sentences kept whole, cut (a heading or a label cut off) or left out (no sentence left to read).

Wikipedia's sentences carry no headings (the dump's section titles are not in its passages): their cut rate is a
false-cut proxy and should stay tiny. ``--out`` writes every sentence's outcome (TSV); ``--against`` an earlier
``--out`` (of the code before a change) prints the sentences whose outcome changed, by change, and a seeded sample of
them to read.

Usage:
    .venv/bin/python bench/headings.py --every 400 --input $D/wiki/enwiki-2013-core.jsonl.gz \\
        $D/cast/2022-dev/provenance_passages.jsonl $D/ikat/2023_train_topics_psg_text.jsonl \\
        $D/ikat/2023_test_topics_9-14_psg_text.jsonl --out runs/headings-after.tsv \\
        --against runs/headings-before.tsv
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections import Counter
from pathlib import Path

from cast.benchmark.scripts import documented_parser, existing_path, run

OUTCOMES = ("whole", "cut", "left out")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = documented_parser(__doc__)
    parser.add_argument("--input", nargs="+", type=existing_path, required=True, help="collection files")
    parser.add_argument("--every", type=int, default=1, help="read every Nth passage (default: every one)")
    parser.add_argument("--out", type=Path, help="write each sentence's outcome here (TSV)")
    parser.add_argument("--against", type=existing_path, help="an earlier --out to compare with")
    parser.add_argument("--sample", type=int, default=50, help="changed sentences to print (default: 50)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def read_outcomes(paths: list[Path], every: int) -> list[dict[str, str]]:
    """One row per sentence the answers may use (:func:`cast.infra.readable.readable_sentence`) of every
    ``every``-th passage: its file, passage, number, outcome, text and what is kept of it."""
    from cast.index.collections import read_passages
    from cast.infra.readable import readable_sentence
    from cast.infra.text import split_sentences
    from cast.infra.wellformed import FormReader

    reader = FormReader()
    rows = []
    for path in paths:
        for number, passage in enumerate(read_passages(path)):
            if number % every:
                continue
            found = [readable_sentence(span) for span in split_sentences(passage.text)]
            sentences = [kept.text for kept in found if kept is not None]
            for k, (text, part) in enumerate(zip(sentences, reader.repair(sentences), strict=True)):
                outcome = "left out" if part is None else "whole" if part[0] == 0 else "cut"
                rows.append(
                    {
                        "file": path.name,
                        "passage": passage.id,
                        "number": str(k),
                        "outcome": outcome,
                        "sentence": " ".join(text.split()),
                        "kept": "" if part is None else " ".join(text[part[0] : part[1]].split()),
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = read_outcomes(args.input, args.every)
    print("| file | sentences | " + " | ".join(OUTCOMES) + " |")
    print("| --- " * (2 + len(OUTCOMES)) + "|")
    for name in dict.fromkeys(row["file"] for row in rows):
        counts = Counter(row["outcome"] for row in rows if row["file"] == name)
        total = sum(counts.values())
        shares = " | ".join(f"{counts[o]:,} ({100 * counts[o] / total:.2f}%)" for o in OUTCOMES)
        print(f"| {name} | {total:,} | {shares} |")
    columns = ("file", "passage", "number", "outcome", "sentence", "kept")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as out:
            writer = csv.DictWriter(out, columns, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
            writer.writeheader()
            writer.writerows(rows)
        print(f"outcomes: {args.out}")
    if args.against:
        with args.against.open(newline="") as before:
            earlier = {
                (row["file"], row["passage"], row["number"]): row
                for row in csv.DictReader(before, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
            }
        changed = [
            (earlier[key], row)
            for row in rows
            if (key := (row["file"], row["passage"], row["number"])) in earlier
            and (earlier[key]["outcome"], earlier[key]["kept"]) != (row["outcome"], row["kept"])
        ]
        print("\n| change | file | sentences |\n| --- | --- | --- |")
        for (was, now, name), count in sorted(
            Counter((old["outcome"], new["outcome"], new["file"]) for old, new in changed).items()
        ):
            print(f"| {was} -> {now} | {name} | {count:,} |")
        print(f"\nA sample of {min(args.sample, len(changed))} changed sentences (before -> after):")
        for old, new in random.Random(args.seed).sample(changed, min(args.sample, len(changed))):
            print(f"- [{new['file']}] {old['sentence']}\n    -> {new['kept'] or '(left out)'}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
