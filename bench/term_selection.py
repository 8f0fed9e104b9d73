"""The term selection rewriter (``rewriter: term_selection``): how well its classifier finds the terms the manual
rewrites add, and what retrieval gains, cross-validated by conversation on its training sets.

The model file it ships is trained by ``cast train term-selector`` (``cast/train/term_selector.py``, which
describes the training sets and the two passes); this script runs the same cross-validation and prints, per pass,
the LMD MRR on the iKAT 2023 train topics per threshold with out-of-fold probabilities, and per training set the
terms' precision, recall and F1 at the chosen threshold::

    .venv/bin/python bench/term_selection.py --data ../shared/data --index indexes/ikat2023-dev

Then compare with HQE and the manual rewrites (``bench/ikat.py retrieval``, ``bench/retrieval.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from cast.benchmark.scripts import DATA, IKAT_INDEX, existing_path, run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=existing_path, default=DATA, help="the data folder (default: %(default)s)"
    )
    parser.add_argument(
        "--index",
        type=existing_path,
        default=IKAT_INDEX,
        help="idf and retrieval index: the iKAT 2023 dev index (default: $CAST_IKAT_INDEX, else %(default)s)",
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--trees", type=int, default=150)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--max-terms", type=int, default=20)
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="SET=W",
        help="weigh a training set's terms W times (e.g. ikat2023-train=5)",
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="SET", help="leave a training set out of the model"
    )
    args = parser.parse_args(argv)

    from cast.train.term_selector import Options, Trainer

    options = Options(
        folds=args.folds,
        trees=args.trees,
        depth=args.depth,
        rate=args.rate,
        max_terms=args.max_terms,
        weights={name: float(w) for name, _, w in (spec.partition("=") for spec in args.weight)},
        exclude=tuple(args.exclude),
    )
    start = time.perf_counter()
    trainer = Trainer(args.data, args.index, options)
    items, found = trainer.passes()
    print(
        f"\nchosen threshold {found.threshold:.2f}; terms at it (out of fold), {time.perf_counter() - start:.0f} s:"
    )
    trainer.per_set(items, found)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
