"""Length calibration: the minimum decoding length that makes a generator's answers average a target length.

The paper tunes each model's ``min_length`` so that its answers average 50 (or 70) words (its Figure 2 plots the
average words against ``min_length``). :func:`calibrate_min_length` sweeps a grid of minimum lengths, then bisects
between the two grid points that bracket the target, and keeps the evaluated value whose average is closest to
it. The search only needs a function from a minimum length to an average word count, so it is tested with a fake
generator; ``cast calibrate`` (``cast.commands.summarize``) plugs in a real one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cast.atomic import atomic_path, write_text_atomic
from cast.errors import ConfigError


@dataclass(frozen=True)
class CalibrationPoint:
    """The average answer length in words at one minimum decoding length (in tokens)."""

    min_length: int
    average_words: float


@dataclass(frozen=True)
class Calibration:
    """The result of a calibration: every point evaluated (by ``min_length``) and the one chosen."""

    target_words: float
    points: tuple[CalibrationPoint, ...]
    chosen: CalibrationPoint


def calibrate_min_length(
    average_words_at: Callable[[int], float],
    target_words: float,
    min_lengths: Iterable[int],
    *,
    refine: bool = True,
) -> Calibration:
    """Find the minimum length whose answers average ``target_words`` words.

    Args:
        average_words_at: the average answer length (words) when decoding with a given minimum length.
        target_words: the wanted average length in words.
        min_lengths: the grid swept first.
        refine: bisect (over integers) between the two adjacent grid points whose averages bracket the target,
            assuming the average grows with the minimum length between them.

    Returns:
        All evaluated points and the chosen one: the closest to the target (the smaller length on a tie).
    """
    grid = sorted(set(min_lengths))
    if not grid or grid[0] < 0:
        raise ConfigError(f"the min-length grid must be non-empty and non-negative, got {grid}")
    seen: dict[int, float] = {}

    def evaluate(length: int) -> float:
        if length not in seen:
            seen[length] = average_words_at(length)
        return seen[length]

    for length in grid:
        evaluate(length)
    if refine:
        bracket = next(
            ((a, b) for a, b in zip(grid, grid[1:], strict=False) if seen[a] < target_words <= seen[b]), None
        )
        if bracket is not None:
            low, high = bracket
            while high - low > 1:
                middle = (low + high) // 2
                if evaluate(middle) < target_words:
                    low = middle
                else:
                    high = middle
    points = tuple(CalibrationPoint(n, seen[n]) for n in sorted(seen))
    chosen = min(points, key=lambda p: (abs(p.average_words - target_words), p.min_length))
    return Calibration(target_words, points, chosen)


def parse_grid(spec: str) -> list[int]:
    """``"0:120:10"`` (start:stop:step, stop included) or ``"20,40,56"`` -> the list of minimum lengths."""
    try:
        if ":" in spec:
            start, stop, step = (int(x) for x in spec.split(":"))
            if step < 1 or stop < start:
                raise ValueError
            return list(range(start, stop + 1, step))
        return [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--min-lengths expects START:STOP:STEP (e.g. 0:120:10) or a comma-separated list, got {spec!r}"
        ) from None


def format_table(calibration: Calibration) -> str:
    """A plain-text table of average words against minimum length, the chosen row marked."""
    lines = ["min_length  avg_words", "----------  ---------"]
    for p in calibration.points:
        mark = "  <- chosen" if p == calibration.chosen else ""
        lines.append(f"{p.min_length:>10}  {p.average_words:>9.1f}{mark}")
    lines.append(f"target {calibration.target_words:g} words: min_length {calibration.chosen.min_length}")
    return "\n".join(lines)


def write_table(calibration: Calibration, path: Path) -> None:
    """The points as a TSV file (``min_length``, ``average_words``)."""
    rows = ["min_length\taverage_words"] + [
        f"{p.min_length}\t{p.average_words:.3f}" for p in calibration.points
    ]
    write_text_atomic(path, "\n".join(rows) + "\n")


def plot(calibration: Calibration, path: Path, title: str) -> None:
    """Average words against minimum length (the paper's Figure 2), with the target and the chosen point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.5))
    axes.plot([p.min_length for p in calibration.points], [p.average_words for p in calibration.points], "o-")
    axes.axhline(
        calibration.target_words, color="grey", linestyle="--", label=f"target {calibration.target_words:g}"
    )
    axes.plot(
        [calibration.chosen.min_length],
        [calibration.chosen.average_words],
        "r*",
        markersize=12,
        label="chosen",
    )
    axes.set_xlabel("minimum length (tokens)")
    axes.set_ylabel("average answer length (words)")
    axes.set_title(title, fontsize=9)
    axes.legend()
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120)
    plt.close(figure)


def calibrated_config(
    source: Path, output: Path, summarizer: dict[str, Any], calibration: Calibration, note: str
) -> str:
    """The YAML text of the config that stores the calibrated ``min_length``.

    Args:
        source: the config file that was calibrated.
        output: where the new config goes. If it is ``source`` itself, its ``summarizer.min_length`` is updated
            in place; otherwise the new file starts from ``source`` (``base:``) and sets the summarizer section.
        summarizer: the summarizer section that was calibrated (as resolved, overrides included).
        calibration: the result.
        note: a line saying how the calibration was made (sample, topics), kept as a comment.
    """
    import yaml

    from cast.config import CONFIG_DIR
    from cast.textfiles import read_yaml

    section = {**summarizer, "min_length": calibration.chosen.min_length}
    if output.resolve() == source.resolve():
        data = read_yaml(source) or {}
        data["summarizer"] = {**(data.get("summarizer") or {}), **section}
    else:
        same_folder = source.resolve().parent == CONFIG_DIR.resolve() == output.resolve().parent
        data = {"base": source.stem if same_folder else str(source.resolve()), "summarizer": section}
    header = (
        f"# Length calibration (cast calibrate): min_length {calibration.chosen.min_length} gives "
        f"{calibration.chosen.average_words:.1f} words on average (target {calibration.target_words:g}).\n"
        f"# {note}\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
