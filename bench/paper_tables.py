"""Reproduction check: the paper's Table 1 and Table 3, recomputed from answers files.

Table 1 compares passage-selection methods (O, ER, EG at several γ) under the extractive "Top-k trim" answer;
Table 3 compares answer generators. This script scores answers files written by ``cast run`` or
``bench/answers.py --answers-dir`` against the CAsT 2022 dev benchmark's references (the organisers' written
responses by default) and prints each table next to the published figures of the same rows.

The published figures are context, not targets: the paper used another collection, other references and its own
ROUGE/METEOR set-up, so only the shape (which method is ahead, by about how much) is comparable.

Each file's selection method and γ come from its records' ``config.selector`` (``cast run``), else from its name
(``eg-g0.25.answers.jsonl``, ``eg.25.answers.jsonl``); its generator from the records' ``answer.generator``.

Usage:
    .venv/bin/python bench/paper_tables.py --answers runs/*.answers.jsonl
    .venv/bin/python bench/paper_tables.py --answers runs/*.answers.jsonl --references qrels \\
        --collection ../shared/data/wiki/enwiki-2013-core.jsonl.gz ../shared/data/cast/2022-dev/provenance_passages.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cast.benchmark.scripts import (
    DEV_2022_QRELS,
    DEV_2022_TOPICS,
    run,
)

MEASURES = ("words", "ROUGE-1", "ROUGE-2", "ROUGE-L", "BLEU-1", "BLEU-4", "METEOR")
EXTRACTIVE_GENERATOR = "topk_trim"

# Published figures (ROUGE-L, METEOR) of the paper's Table 1, by (selection method, γ), for Top-k trim answers.
# Only the rows known to us are filled in; add others as (method, gamma): (rouge_l, meteor).
PUBLISHED_TABLE1: dict[tuple[str, float | None], tuple[float, float]] = {
    ("o", None): (28.19, 42.62),
    ("eg", 0.25): (28.74, 44.07),
}
# Published figures of the paper's Table 3, by generator name as our answers files record it; none known to us.
PUBLISHED_TABLE3: dict[str, tuple[float, float]] = {}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from cast.commands.evaluate import add_answer_options
    from cast.evaluate.significance import CORRECTIONS

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"Defaults: --topics {DEV_2022_TOPICS}, --qrels {DEV_2022_QRELS}.\n\nUsage:"
        + __doc__.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--answers", nargs="+", required=True, type=Path, metavar="FILE", help="answers files"
    )
    add_answer_options(parser)
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        help="Holm-Bonferroni-correct the p-values of the rows tested against O, per measure",
    )
    parser.set_defaults(topics=DEV_2022_TOPICS, qrels=DEV_2022_QRELS)
    return parser.parse_args(argv)


def table_rows(evaluations: dict[str, Any], files: list[Any]) -> tuple[list[dict], list[dict]]:
    """Rows of Table 1 (extractive answers, by selection method) and Table 3 (other generators)."""
    from cast.evaluate.plots import selector_settings

    table1, table3 = [], []
    for answers_file in files:
        first = next(iter(answers_file.records.values()))
        settings = selector_settings(first, answers_file.name)
        generator = next(iter(answers_file.answers.values())).generator or "?"
        means = evaluations[answers_file.name].mean()
        row = {"system": answers_file.name, **{m: float(means[m]) for m in MEASURES}}
        if generator.startswith(EXTRACTIVE_GENERATOR):
            published = (
                PUBLISHED_TABLE1.get((settings.method, settings.gamma)) if not settings.variant else None
            )
            table1.append({**row, "selection": _selection_label(settings), "published": published})
        else:
            row["selection"] = _selection_label(settings)
            table3.append({**row, "generator": generator, "published": PUBLISHED_TABLE3.get(generator)})
    return table1, table3


def _selection_label(settings: Any) -> str:
    if settings.method is None:
        return "?"
    label = settings.method.upper()
    if settings.gamma is not None:
        label += f" γ={settings.gamma:g}"
    return label + (f" +{settings.variant}" if settings.variant else "")


def format_table(
    title: str,
    rows: list[dict],
    first_columns: tuple[str, ...],
    significant: set[tuple[str, str]] = frozenset(),
) -> str:
    """A Markdown table: our measures (marked † where ``(system, measure)`` is in ``significant``), then the
    published ROUGE-L and METEOR of the same row."""
    from cast.evaluate.significance import SIGNIFICANT_MARK

    header = [*first_columns, *MEASURES, "paper ROUGE-L", "paper METEOR"]
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        published = row["published"]
        cells = [str(row[c]) for c in first_columns]
        mark = {m: SIGNIFICANT_MARK if (row["system"], m) in significant else "" for m in MEASURES}
        cells += [f"{row['words']:.1f}", *(f"{row[m]:.2f}{mark[m]}" for m in MEASURES[1:])]
        cells += [f"{v:.2f}" for v in published] if published else ["—", "—"]
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append(
            "| " + " | ".join(["(no answers files of this kind given)"] + [""] * (len(header) - 1)) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from cast.commands.evaluate import answer_options
    from cast.evaluate.experiment import evaluate_answer_files
    from cast.evaluate.report import compare
    from cast.formats.answers import read_answers

    args = parse_args(argv)
    files = [read_answers(path) for path in args.answers]
    evaluations = evaluate_answer_files(files, **answer_options(args))
    table1, table3 = table_rows(evaluations, files)
    order = {"O": 0, "ER": 1, "EG": 2}
    table1.sort(key=lambda r: (order.get(r["selection"].split()[0], 3), r["selection"], r["system"]))
    notes = [f"{name}: {note}" for name, evaluation in evaluations.items() for note in evaluation.notes()]
    # Significance against the O (original ranking) row of Table 1, where there is one.
    baseline = next((r["system"] for r in table1 if r["selection"] == "O"), None)
    comparison = compare({name: e.per_turn for name, e in evaluations.items()}, baseline, args.correction)
    significant = {(n, m) for n in evaluations for m in MEASURES if comparison.significant(n, m)}
    print(
        format_table(
            "Table 1: passage selection, Top-k trim answers", table1, ("selection", "system"), significant
        )
    )
    print()
    print(
        format_table("Table 3: answer generators", table3, ("generator", "selection", "system"), significant)
    )
    print()
    print(comparison.legend())
    print(
        "Published figures are context only: the paper used a different collection and different references, "
        "so compare the ordering of rows, not the values. Measures in percent; words = mean answer length."
    )
    for note in notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
