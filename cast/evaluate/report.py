"""Comparison tables, per-turn CSVs and Markdown reports over several systems' per-turn measures."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.core.records import Conversation
from cast.evaluate.significance import (
    CORRECTIONS,
    SIGNIFICANCE_LEVEL,
    SIGNIFICANT_MARK,
    PairedTest,
    holm_bonferroni,
    paired_test,
)
from cast.infra.atomic import write_text_atomic

if TYPE_CHECKING:
    import pandas as pd

_SIMPLE_QID = re.compile(r"^\d+_(\d+)$")


@dataclass
class Comparison:
    """Systems side by side on the same measures.

    Attributes:
        means: one row per system, one column per measure (mean over that system's turns).
        tests: one row per (system, measure) compared with the baseline: n, mean difference, both p-values and,
            with a correction, both corrected p-values (``t_test_p_corrected``, ``randomisation_p_corrected``).
        baseline: the baseline system's name, if any.
        correction: the multiple-comparison correction applied (``holm``), if any.
    """

    means: pd.DataFrame
    tests: pd.DataFrame
    baseline: str | None
    correction: str | None = None

    def significant(self, system: str, measure: str) -> bool:
        if self.tests.empty or (system, measure) not in self.tests.index:
            return False
        row = self.tests.loc[(system, measure)]
        suffix = "_corrected" if self.correction else ""
        return bool(
            row[f"t_test_p{suffix}"] < SIGNIFICANCE_LEVEL
            and row[f"randomisation_p{suffix}"] < SIGNIFICANCE_LEVEL
        )

    def formatted(self, digits: int = 4) -> pd.DataFrame:
        """The means as text, with :data:`SIGNIFICANT_MARK` where a system differs from the baseline."""
        table = self.means.map(lambda v: f"{v:.{digits}f}")
        for system in table.index:
            for measure in table.columns:
                if self.significant(system, measure):
                    table.loc[system, measure] += SIGNIFICANT_MARK
        return table

    def legend(self) -> str:
        if self.baseline is None:
            return "No baseline chosen: no significance tests."
        legend = (
            f"{SIGNIFICANT_MARK}: differs from the baseline {self.baseline} at p < {SIGNIFICANCE_LEVEL} in both a "
            "paired t-test and a paired randomisation test (10,000 sign flips), over the turns both systems have"
        )
        if self.correction == "holm":
            tested = len(self.means) - 1
            systems = f"{tested} system" + ("s" if tested != 1 else "")
            legend += f"; p-values Holm-Bonferroni-corrected per measure over the {systems} tested"
        return legend + "."


def compare(
    per_turn: Mapping[str, pd.DataFrame], baseline: str | None = None, correction: str | None = None
) -> Comparison:
    """Compare systems given their per-turn measures (``{system: DataFrame indexed by qid}``).

    Args:
        per_turn: each system's per-turn measures.
        baseline: the system every other is tested against (paired tests over the turns both have).
        correction: ``holm`` corrects each measure's p-values for the number of systems tested against the
            baseline (Holm-Bonferroni, as PyTerrier's ``Experiment(correction="holm")``); None tests each alone.
    """
    import pandas as pd

    if baseline is not None and baseline not in per_turn:
        raise ValueError(f"baseline {baseline!r} is not among the systems: {', '.join(per_turn)}")
    if correction is not None and correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose one of {', '.join(CORRECTIONS)}")
    means = pd.DataFrame({name: frame.mean() for name, frame in per_turn.items()}).T
    means.index.name = "system"
    rows: dict[tuple[str, str], PairedTest] = {}
    if baseline is not None:
        base = per_turn[baseline]
        for name, frame in per_turn.items():
            if name == baseline:
                continue
            shared = frame.index.intersection(base.index)
            for measure in frame.columns.intersection(base.columns):
                rows[(name, measure)] = paired_test(
                    frame.loc[shared, measure].to_numpy(), base.loc[shared, measure].to_numpy()
                )
    tests = pd.DataFrame(
        [vars(test) for test in rows.values()],
        index=pd.MultiIndex.from_tuples(list(rows), names=["system", "measure"]),
        columns=["n", "mean_difference", "t_test_p", "randomisation_p"],
    )
    if correction is not None:
        for column in ("t_test_p", "randomisation_p"):
            corrected = tests[column].copy()
            for _, family in tests.groupby(level="measure"):
                corrected[family.index] = holm_bonferroni(family[column].tolist())
            tests[f"{column}_corrected"] = corrected
    return Comparison(means=means, tests=tests, baseline=baseline, correction=correction)


def long_per_turn(
    per_turn: Mapping[str, pd.DataFrame], depths: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """One row per (system, turn): ``system, qid, [depth,] measures...`` for a per-turn CSV."""
    import pandas as pd

    frames = []
    for name, frame in per_turn.items():
        frame = frame.reset_index()
        frame.insert(0, "system", name)
        if depths is not None:
            frame.insert(2, "depth", [depths.get(qid) for qid in frame["qid"]])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def turn_depths(conversations: Iterable[Conversation]) -> dict[str, int]:
    """The 1-based position of each turn in its conversation (a qid on several 2022 paths keeps its first)."""
    depths: dict[str, int] = {}
    for conversation in conversations:
        for position, turn in enumerate(conversation.turns, 1):
            depths.setdefault(turn.qid, position)
    return depths


def depths_from_qids(qids: Iterable[str]) -> dict[str, int]:
    """Turn depths read from ``<topic>_<turn>`` qids (CAsT 2019-2021); other qids need the topics file."""
    return {qid: int(m.group(1)) for qid in qids if (m := _SIMPLE_QID.match(qid))}


def mean_by_depth(
    per_turn: Mapping[str, pd.DataFrame], measure: str, depths: Mapping[str, int]
) -> pd.DataFrame:
    """Mean ``measure`` per turn depth: one row per depth, one column per system."""
    import pandas as pd

    columns = {}
    for name, frame in per_turn.items():
        if measure not in frame.columns:
            continue
        known = [qid for qid in frame.index if qid in depths]
        values = frame.loc[known, measure]
        columns[name] = values.groupby([depths[qid] for qid in known]).mean()
    table = pd.DataFrame(columns).sort_index()
    table.index.name = "depth"
    return table


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A GitHub Markdown table of ``frame`` (index first)."""
    index_name = frame.index.name or ""
    header = [index_name, *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join([" --- "] * len(header)) + "|"]
    for label, row in frame.iterrows():
        label = " / ".join(map(str, label)) if isinstance(label, tuple) else str(label)
        cells = [_cell(v, digits) for v in row]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


def _cell(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically (a temporary file renamed into place)."""
    write_text_atomic(path, text)


def write_csv(path: str | Path, frame: pd.DataFrame, index: bool = True) -> None:
    """Write a CSV atomically, floats with 6 decimals."""
    write_text(path, frame.to_csv(index=index, float_format="%.6f"))


def comparison_section(title: str, comparison: Comparison, notes: Sequence[str]) -> str:
    """A Markdown section: the comparison table, its legend and the notes on how it was computed."""
    parts = [f"## {title}", "", markdown_table(comparison.formatted()), "", comparison.legend(), ""]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"
