"""Regenerate the demo sample under cast/data/sample/ from the 2013 Wikipedia passages.

The sample is every passage of a fixed list of articles around Marie Curie and radioactivity, plus background
passages (the first few passages of every N-th other article) so that word statistics (idf) and retrieval behave
as in a real collection, in the source file's order, written as gzip JSON lines with a zero timestamp, so the same
input gives byte-identical output.
It also writes ATTRIBUTION.md (the licence and the article titles) and conversation.json (a demo conversation
whose answers are in the sample).

    .venv/bin/python bench/make_sample.py [--wiki ../shared/data/wiki/enwiki-2013-core.jsonl.gz]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from collections import Counter
from pathlib import Path

from cast.benchmark.scripts import (
    REPO,
    WIKI,
    existing_path,
    run,
)
from cast.infra.atomic import atomic_path

DEFAULT_OUT = REPO / "cast" / "data" / "sample"

ARTICLES = (
    "Marie Curie",
    "Pierre Curie",
    "Polonium",
    "Radium",
    "Henri Becquerel",
    "Ernest Rutherford",
    "Uranium",
    "Thorium",
    "Radon",
    "Radiation",
    "Radiation therapy",
    "Radionuclide",
    "Half-life",
    "Alpha decay",
    "Beta decay",
    "Beta particle",
    "Geiger counter",
    "X-ray",
    "Background radiation",
    "Radioactive waste",
    "Radiometric dating",
    "Radiocarbon dating",
    "Electromagnetic radiation",
    "Atom",
    "Atomic theory",
    "Electron",
    "Proton",
    "Neutron",
    "Nuclear physics",
    "Nuclear reactor",
    "Nuclear fission",
    "Chemical element",
    "Periodic table",
    "Nobel Prize",
    "Nobel Prize in Physics",
    "Alfred Nobel",
    "College of Sorbonne",
    "Warsaw",
    "Partitions of Poland",
)

# Background: the first BACKGROUND_PASSAGES passages of every BACKGROUND_EVERY-th other article.
BACKGROUND_EVERY = 30
BACKGROUND_PASSAGES = 3

# Each reference is one the offline profile's rewriter (term selection) resolves from the earlier utterances: "she"
# and "her" (Marie Curie), "he" (her husband); the manual rewrites are shown beside with `cast demo --manual`.
CONVERSATION = {
    "topic_id": "demo",
    "title": "Marie Curie and radioactivity",
    "turns": [
        {"utterance": "Who was Marie Curie?", "manual_rewrite": "Who was Marie Curie?"},
        {"utterance": "Who was her husband?", "manual_rewrite": "Who was Marie Curie's husband?"},
        {"utterance": "How did he die?", "manual_rewrite": "How did Pierre Curie die?"},
        {
            "utterance": "Which chemical elements did she discover?",
            "manual_rewrite": "Which chemical elements did Marie Curie discover?",
        },
        {"utterance": "How did she die?", "manual_rewrite": "How did Marie Curie die?"},
        {
            "utterance": "Why did she name polonium that way?",
            "manual_rewrite": "Why did Marie Curie name polonium that way?",
        },
    ],
}


def attribution(counts: Counter[str], background: Counter[str], wiki: Path) -> str:
    lines = [
        "# Sample collection: attribution",
        "",
        "`passages.jsonl.gz` holds every passage of the Wikipedia articles listed first below, and the first",
        f"{BACKGROUND_PASSAGES} passages of every {BACKGROUND_EVERY}th other article (background), as they appear in",
        f"`{wiki.name}` (English Wikipedia, 2013 dump: core articles, paragraphs of 15+ words split at sentence",
        "ends to at most 200 words; WikiExtractor output found in the jason-feng/wikiVisual repository).",
        "",
        "The text is from Wikipedia and is licensed under the Creative Commons Attribution-ShareAlike 3.0",
        "Unported licence (CC BY-SA 3.0, https://creativecommons.org/licenses/by-sa/3.0/). Authors: the",
        "contributors to each article, listed in its history at https://en.wikipedia.org/wiki/<title>.",
        "The passages are unchanged; only the selection of articles is ours.",
        "",
        "`conversation.json` is a demo conversation written for this sample (Apache-2.0, like the toolkit).",
        "",
        f"Regenerate with `.venv/bin/python bench/make_sample.py` ({sum(counts.values())} topic and "
        f"{sum(background.values())} background passages).",
        "",
        "| article | passages |",
        "| --- | ---: |",
    ]
    lines += [f"| {title} | {counts[title]} |" for title in ARTICLES]
    lines += ["", "Background articles:", "", "| article | passages |", "| --- | ---: |"]
    lines += [f"| {title} | {n} |" for title, n in background.items()]
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--wiki",
        type=existing_path,
        default=str(WIKI),
        help="the Wikipedia passages (JSON lines .gz; default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="the sample folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)

    wanted = set(ARTICLES)
    counts: Counter[str] = Counter()
    background: Counter[str] = Counter()
    article_numbers: dict[str, int] = {}
    lines = []
    with gzip.open(args.wiki, "rt", encoding="utf-8") as source:
        for line in source:
            record = json.loads(line)
            title = record["title"]
            number = article_numbers.setdefault(title, len(article_numbers))
            if title in wanted:
                counts[title] += 1
            elif number % BACKGROUND_EVERY == 0 and background[title] < BACKGROUND_PASSAGES:
                background[title] += 1
            else:
                continue
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    missing = [title for title in ARTICLES if not counts[title]]
    if missing:
        print(f"make_sample: articles not in {args.wiki}: {', '.join(missing)}", file=sys.stderr)
        return 1

    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        gz.write("".join(lines).encode("utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "passages.jsonl.gz", buffer.getvalue())
    write_atomically(args.out / "ATTRIBUTION.md", attribution(counts, background, args.wiki).encode())
    conversation = json.dumps(CONVERSATION, indent=2, ensure_ascii=False) + "\n"
    write_atomically(args.out / "conversation.json", conversation.encode())
    print(
        f"wrote {len(lines)} passages of {len(ARTICLES)} articles ({len(buffer.getvalue()):,} bytes) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
