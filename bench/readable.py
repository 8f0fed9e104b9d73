"""How much of a collection's text the answers may use: sentences kept whole, trimmed of boilerplate, or dropped
(:func:`cast.infra.readable.readable_sentence`), per source file, with a seeded sample of the dropped and trimmed
sentences to read (are they boilerplate, or content lost?). With ``--wellformed``, the sentences kept or trimmed are
also read as the extractive answers read them (``summarizer.wellformed``: :mod:`cast.infra.wellformed`, a spaCy
tagger), and those it would leave out are counted by their fault (a glued heading, a quotation that is none, no
verb, text about the page). ``--every N`` reads every Nth passage (the 820k Wikipedia passages take hours whole).

Usage:
    .venv/bin/python bench/readable.py --input $D/wiki/enwiki-2013-core.jsonl.gz \\
        $D/cast/2022-dev/provenance_passages.jsonl $D/ikat/2023_train_topics_psg_text.jsonl \\
        $D/ikat/2023_test_topics_9-14_psg_text.jsonl --examples runs/readable-examples.tsv
    .venv/bin/python bench/readable.py --wellformed --every 400 --input $D/wiki/enwiki-2013-core.jsonl.gz
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

from cast.benchmark.scripts import (
    documented_parser,
    existing_path,
    run,
)

OUTCOMES = ("kept", "trimmed", "dropped: cut", "dropped: boilerplate", "dropped: short", "dropped: title")
MALFORMED = ("malformed: heading", "malformed: quotation", "malformed: no verb", "malformed: page text")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = documented_parser(__doc__)
    parser.add_argument("--input", nargs="+", type=existing_path, required=True, help="collection files")
    parser.add_argument(
        "--examples", type=Path, help="write a sample of dropped and trimmed sentences here (TSV)"
    )
    parser.add_argument(
        "--per-outcome", type=int, default=100, help="examples per outcome and file (default: 100)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--wellformed",
        action="store_true",
        help="also count the sentences kept that the well-formedness reader leaves out, by fault",
    )
    parser.add_argument("--every", type=int, default=1, help="read every Nth passage (default: every one)")
    return parser.parse_args(argv)


def outcome(span) -> tuple[str, str]:
    """What becomes of one sentence, and the text kept."""
    from cast.infra.readable import MIN_WORDS, boilerplate_in, is_cut, readable_sentence

    kept = readable_sentence(span)
    if kept is not None:
        return ("kept" if kept.text == span.text else "trimmed"), kept.text
    if boilerplate_in(span.text):
        return "dropped: boilerplate", ""
    if len(span.text.split()) < MIN_WORDS:
        return "dropped: short", ""
    if is_cut(span.text):
        return "dropped: cut", ""
    return "dropped: title", ""


def main(argv: list[str] | None = None) -> int:
    from cast.index.collections import read_passages
    from cast.infra.text import split_sentences

    args = parse_args(argv)
    rng = random.Random(args.seed)
    reader = None
    if args.wellformed:
        from cast.infra.wellformed import FormReader

        reader = FormReader()
    outcomes = (*OUTCOMES, *MALFORMED) if reader else OUTCOMES
    rows = []
    print("| file | passages | sentences | " + " | ".join(outcomes) + " |")
    print("| --- " * (3 + len(outcomes)) + "|")
    for path in args.input:
        counts: Counter[str] = Counter()
        passages = 0
        # Reservoir samples of each outcome but "kept".
        samples: dict[str, list[tuple[str, str]]] = {o: [] for o in outcomes[1:]}
        seen: Counter[str] = Counter()
        for number, passage in enumerate(read_passages(path)):
            if number % args.every:
                continue
            passages += 1
            read = [(span, *outcome(span)) for span in split_sentences(passage.text)]
            if reader is not None:
                kept = [k for k, (_, what, _) in enumerate(read) if what in ("kept", "trimmed")]
                for k, form in zip(kept, reader.read([read[k][2] for k in kept]), strict=True):
                    if form.fault is not None:
                        read[k] = (read[k][0], f"malformed: {form.fault}", "")
            for span, what, text in read:
                counts[what] += 1
                if what == "kept":
                    continue
                seen[what] += 1
                reservoir = samples[what]
                if len(reservoir) < args.per_outcome:
                    reservoir.append((span.text, text))
                else:
                    slot = rng.randrange(seen[what])
                    if slot < args.per_outcome:
                        reservoir[slot] = (span.text, text)
        total = sum(counts.values())
        shares = " | ".join(f"{counts[o]:,} ({100 * counts[o] / max(total, 1):.2f}%)" for o in outcomes)
        print(f"| {path.name} | {passages:,} | {total:,} | {shares} |")
        rows += [
            (path.name, what, before, after) for what, found in samples.items() for before, after in found
        ]
    if args.examples:
        args.examples.parent.mkdir(parents=True, exist_ok=True)
        lines = ["file\toutcome\tsentence\tkept"]
        lines += ["\t".join(" ".join(cell.split()) for cell in row) for row in rows]
        args.examples.write_text("\n".join(lines) + "\n")
        print(f"examples: {args.examples}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
