"""Fits the table from which the rewriters estimate how rare a word is on a small collection
(``cast/rewrite/vocabulary.py``, ``ENGLISH_IDF``): a word's BM25 idf in a large Wikipedia index, as a function of
its English frequency (wordfreq's Zipf scale, log10 of its count per billion words).

For every word of the conversations' utterances and responses that the index holds, its idf there and its Zipf
frequency; the table is the median idf of the words in each half-Zipf band (bands of fewer than 5 words left out),
made non-increasing, with the median idf of the words wordfreq does not know at Zipf 0. It prints the table, and
how closely the table's estimates, and each ``--compare`` index's own idf, follow the large index's idf (mean
absolute difference, Pearson correlation) on the words of the ``--check`` conversations (the default fits on the
term selector's training conversations and checks on conversations it never saw)::

    .venv/bin/python bench/english_idf.py --index /path/to/pooled-dev --compare /path/to/small-index
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from cast.benchmark.scripts import DATA, DEV_2022_TOPICS, existing_path, run

FIT_TOPICS = (
    DATA / "cast" / "2019" / "evaluation_topics_v1.0.json",
    DATA / "cast" / "2020" / "2020_manual_evaluation_topics_v1.0.json",
    DATA / "cast" / "2021" / "2021_manual_evaluation_topics_v1.0.json",
    DATA / "ikat" / "2023_train_topics.json",
)
CHECK_TOPICS = (DEV_2022_TOPICS, DATA / "ikat" / "2023_test_topics_9-14.json")
BAND = 0.5
MIN_WORDS = 5
_WORD = re.compile(r"[^\W\d_][\w'-]*")


def conversation_words(paths: Sequence[Path]) -> list[str]:
    """Every distinct word of the conversations' utterances and responses, sorted."""
    from cast.formats.topics import load_topics

    words = set()
    for path in paths:
        for conversation in load_topics(path):
            for turn in conversation.turns:
                words.update(_WORD.findall(f"{turn.utterance} {turn.response or ''}"))
    return sorted(words)


def idf_table(pairs: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """``(zipf, idf)`` knots from ``(zipf, idf)`` pairs: the median idf of each half-Zipf band, non-increasing."""
    import numpy as np

    zipf = np.array([z for z, _ in pairs])
    idf = np.array([i for _, i in pairs])
    knots = []
    if (zipf == 0).sum() >= MIN_WORDS:  # words wordfreq does not know
        knots.append((0.0, float(np.median(idf[zipf == 0]))))
    for centre in np.arange(1.0, 8.0, BAND):
        band = (zipf >= centre - BAND / 2) & (zipf < centre + BAND / 2)
        if band.sum() >= MIN_WORDS:
            knots.append((float(centre), float(np.median(idf[band]))))
    for position in range(1, len(knots)):  # a more frequent word is never rarer
        knots[position] = (knots[position][0], min(knots[position][1], knots[position - 1][1]))
    return [(z, round(i, 2)) for z, i in knots]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--index",
        type=existing_path,
        default=os.environ.get("CAST_POOLED_INDEX"),
        help="a large Wikipedia index (default: $CAST_POOLED_INDEX)",
    )
    for name, topics, default in (
        ("fit", FIT_TOPICS, "fit the table (default: CAsT 2019-2021 and iKAT 2023 train)"),
        ("check", CHECK_TOPICS, "check it (default: CAsT 2022 dev and iKAT 2023 test 9-14)"),
    ):
        parser.add_argument(
            f"--{name}",
            type=existing_path,
            nargs="+",
            default=list(topics),
            help=f"topics whose words {default}",
        )
    parser.add_argument("--compare", type=existing_path, nargs="*", default=[], help="indexes to compare")
    args = parser.parse_args(argv)
    if args.index is None:
        parser.error("give --index or set CAST_POOLED_INDEX")

    import numpy as np
    from wordfreq import zipf_frequency

    from cast.core.config import load_config
    from cast.infra.resources import Resources
    from cast.rewrite.vocabulary import IndexVocabulary, english_idf

    def vocabulary(index: Path) -> IndexVocabulary:
        config = load_config("offline", [f"index={index}", "cache_dir=null"])
        return IndexVocabulary(Resources(config), importance="index")

    large = vocabulary(args.index)

    def idf_pairs(words: Sequence[str], estimate: Callable[[str], float | None]) -> list[tuple[float, float]]:
        """``(idf in the large index, estimate)`` of each word that both know."""
        pairs = []
        for word in words:
            known = large.term_of(word)
            estimated = estimate(word) if known is not None else None
            if known is not None and estimated is not None:
                pairs.append((known[1], estimated))
        return pairs

    def zipf(word: str) -> float:
        return zipf_frequency(word.lower(), "en")

    def idf_in(index: Path) -> Callable[[str], float | None]:
        other = vocabulary(index)
        return lambda word: known[1] if (known := other.term_of(word)) is not None else None

    fitted = [(zipf, idf) for idf, zipf in idf_pairs(conversation_words(args.fit), zipf)]
    print(f"fit: {len(fitted)} words of {', '.join(p.name for p in args.fit)} in {args.index}")
    print("ENGLISH_IDF =", tuple(idf_table(fitted)))
    words = conversation_words(args.check)
    print(f"\ncheck: the words of {', '.join(p.name for p in args.check)}, against their idf in {args.index}")
    print(f"{'idf from':<48}{'words':>7}{'mean |diff|':>13}{'correlation':>13}")
    estimates = {
        "the table (English frequency)": english_idf,
        **{f"the index {i}": idf_in(i) for i in args.compare},
    }
    for name, estimate in estimates.items():
        truth, estimated = np.array(idf_pairs(words, estimate)).T
        difference, correlation = np.abs(estimated - truth).mean(), np.corrcoef(truth, estimated)[0, 1]
        print(f"{name:<48}{len(truth):>7}{difference:>13.2f}{correlation:>13.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run(main))
