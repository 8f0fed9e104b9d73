"""``cast train``: train the models the toolkit ships (the JSON files its stages read)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cast.entity.link.wikipedia import MODEL_FILE as LINKER_MODEL
from cast.errors import CastError
from cast.rewrite.terms import MODEL_FILE as TERM_SELECTOR_MODEL
from cast.summarize.learnt_extractive import BUNDLED_MODEL as SENTENCE_SCORER_MODEL
from cast.train import entity_linker, sentence_scorer, term_selector


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser(
        "train",
        help=summary,
        description="Train one of the models the toolkit ships; --model says where it goes (by default the "
        "shipped file, which the stage then reads).",
    )
    commands = parser.add_subparsers(dest="train_command", metavar="MODEL", required=True)

    terms = commands.add_parser(
        "term-selector",
        help="the term selection rewriter's classifier (rewriter: term_selection)",
        description=(term_selector.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    terms.add_argument(
        "--data", type=Path, required=True, help="the data folder (cast/2019-2021, canard/dev.json, ikat/)"
    )
    terms.add_argument("--index", type=Path, required=True, help="the index giving idf and the LMD rankings")
    terms.add_argument("--folds", type=int, default=5, help="cross-validation folds (default: 5)")
    add_tree_arguments(terms, trees=150, depth=4, rate=0.1)
    terms.add_argument(
        "--max-terms", type=int, default=20, help="the most terms a rewrite adds (default: 20)"
    )
    terms.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="SET=W",
        help="weigh a training set's terms W times (e.g. ikat2023-train=5: iKAT's long written responses are "
        "rare in the rest)",
    )
    terms.add_argument(
        "--exclude", action="append", default=[], metavar="SET", help="leave a training set out of the model"
    )
    terms.add_argument(
        "--model", type=Path, default=TERM_SELECTOR_MODEL, help="where to write (default: %(default)s)"
    )
    terms.set_defaults(func=train_term_selector)

    linker = commands.add_parser(
        "entity-linker",
        help="the wikipedia linker's decision (linker: wikipedia), on ConEL-2",
        description=(entity_linker.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    linker.add_argument("--train-data", type=Path, required=True, help="ConEL-2's ConEL22_EL_Train.json")
    linker.add_argument("--val-data", type=Path, required=True, help="ConEL-2's ConEL22_EL_Val.json")
    linker.add_argument("--index", type=Path, help="an index whose entity resources (INDEX.entities) to use")
    linker.add_argument("--kb", type=Path, help="the knowledge base file (default: that of `cast entity kb`)")
    linker.add_argument("--min-precision", type=float, default=0.6, help="least val precision (default: 0.6)")
    add_tree_arguments(linker, trees=600, depth=4, rate=0.03)
    linker.add_argument(
        "--model", type=Path, default=LINKER_MODEL, help="where to write (default: %(default)s)"
    )
    linker.set_defaults(func=train_entity_linker)

    scorer = commands.add_parser(
        "sentence-scorer",
        help="the learnt extractive generator's sentence scorer (summarizer: learnt_extractive)",
        description=(sentence_scorer.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scorer.add_argument(
        "--answers", type=Path, nargs="+", required=True, help="answers files (.answers.jsonl) to learn from"
    )
    scorer.add_argument(
        "--topics", type=Path, nargs="+", required=True, help="their topics files, in the same order"
    )
    scorer.add_argument(
        "--words",
        type=int,
        default=50,
        help="the word budget the answers were made for (recorded; default: 50)",
    )
    add_tree_arguments(scorer, trees=200, depth=3, rate=0.05)
    scorer.add_argument(
        "--model", type=Path, default=SENTENCE_SCORER_MODEL, help="where to write (default: %(default)s)"
    )
    scorer.set_defaults(func=train_sentence_scorer)


def add_tree_arguments(parser: argparse.ArgumentParser, *, trees: int, depth: int, rate: float) -> None:
    """The gradient-boosted trees' ``--trees``, ``--depth`` and ``--rate``, with their defaults for a model."""
    parser.add_argument("--trees", type=int, default=trees, help="boosting rounds (default: %(default)s)")
    parser.add_argument("--depth", type=int, default=depth, help="tree depth (default: %(default)s)")
    parser.add_argument("--rate", type=float, default=rate, help="learning rate (default: %(default)s)")


def train_term_selector(args: argparse.Namespace) -> int:
    weights = {}
    for spec in args.weight:
        name, _, value = spec.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise CastError(f"--weight {spec!r}: give SET=W, e.g. ikat2023-train=5") from None
    options = term_selector.Options(
        folds=args.folds,
        trees=args.trees,
        depth=args.depth,
        rate=args.rate,
        max_terms=args.max_terms,
        weights=weights,
        exclude=tuple(args.exclude),
    )
    path = term_selector.train(
        _existing(args.data, "--data"), _existing(args.index, "--index"), args.model, options
    )
    print(f"model written to {path}")
    return 0


def train_entity_linker(args: argparse.Namespace) -> int:
    options = entity_linker.Options(
        trees=args.trees, depth=args.depth, rate=args.rate, min_precision=args.min_precision
    )
    entity_linker.train(
        _existing(args.train_data, "--train-data"),
        _existing(args.val_data, "--val-data"),
        args.model,
        options,
        index=args.index,
        kb=args.kb,
    )
    print(f"model written to {args.model}")
    return 0


def train_sentence_scorer(args: argparse.Namespace) -> int:
    if len(args.answers) != len(args.topics):
        raise CastError(
            f"give one --topics file per --answers file ({len(args.answers)} answers, {len(args.topics)} topics)"
        )
    turns = [
        turn
        for answers, topics in zip(args.answers, args.topics, strict=True)
        for turn in sentence_scorer.training_turns(
            _existing(answers, "--answers"), _existing(topics, "--topics")
        )
    ]
    print(f"{len(turns)} turns, {sum(len(t.candidates) for t in turns)} candidate sentences")
    options = sentence_scorer.Options(trees=args.trees, depth=args.depth, rate=args.rate)
    print(f"model written to {sentence_scorer.train(turns, args.model, options, args.words)}")
    return 0


def _existing(path: Path, option: str) -> Path:
    if not path.exists():
        raise CastError(f"{option} {path}: no such file or folder")
    return path
