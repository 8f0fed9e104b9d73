"""How much of a collection's text the answers may use: sentences kept whole, trimmed of boilerplate, or dropped
(:func:`cast.infra.readable.readable_sentence`), per source file, with a seeded sample of the dropped and trimmed
sentences to read (are they boilerplate, or content lost?).

Usage:
    .venv/bin/python bench/readable.py --input $D/wiki/enwiki-2013-core.jsonl.gz \\
        $D/cast/2022-dev/provenance_passages.jsonl $D/ikat/2023_train_topics_psg_text.jsonl \\
        $D/ikat/2023_test_topics_9-14_psg_text.jsonl --examples runs/readable-examples.tsv
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import documented_parser, existing_path, run  # noqa: E402

OUTCOMES = ("kept", "trimmed", "dropped: cut", "dropped: boilerplate", "dropped: short", "dropped: title")


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
    return parser.parse_args(argv)


def outcome(span) -> tuple[str, str]:  # noqa: ANN001 (a SentenceSpan)
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
    rows = []
    print("| file | passages | sentences | " + " | ".join(OUTCOMES) + " |")
    print("| --- " * (3 + len(OUTCOMES)) + "|")
    for path in args.input:
        counts: Counter[str] = Counter()
        passages = 0
        # Reservoir samples of each outcome but "kept".
        samples: dict[str, list[tuple[str, str]]] = {o: [] for o in OUTCOMES[1:]}
        seen: Counter[str] = Counter()
        for passage in read_passages(path):
            passages += 1
            for span in split_sentences(passage.text):
                what, text = outcome(span)
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
        shares = " | ".join(f"{counts[o]:,} ({100 * counts[o] / max(total, 1):.2f}%)" for o in OUTCOMES)
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
