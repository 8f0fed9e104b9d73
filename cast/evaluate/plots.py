"""The paper's figures as PNG files (matplotlib, headless)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cast.infra.atomic import atomic_path

if TYPE_CHECKING:
    import pandas as pd

# The paper's order: original ranking, entity relatedness, entity graph.
METHOD_ORDER = ("o", "er", "eg")
_NAME_METHOD = re.compile(r"^(o|er|eg)(\d*\.?\d+)?$")
_NAME_GAMMA = re.compile(r"^g(?:amma)?=?(\d*\.?\d+)$")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: Any, path: str | Path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, bbox_inches="tight")
    _pyplot().close(figure)
    return path


def depth_plot(ndcg: pd.DataFrame | None, meteor: pd.DataFrame | None, path: str | Path) -> Path:
    """nDCG@3 (left axis, solid) and METEOR (right axis, dashed) by turn depth, one line per system (Figs 3/5).

    Args:
        ndcg: mean nDCG@3 per depth (index depth, one column per system), or None.
        meteor: mean METEOR per depth, likewise, or None.
    """
    if ndcg is None and meteor is None:
        raise ValueError("a depth plot needs nDCG@3 or METEOR values")
    plt = _pyplot()
    figure, left = plt.subplots(figsize=(7, 4))
    left.set_xlabel("turn depth")
    left.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    axes = []
    colours = (f"C{i}" for i in itertools.count())  # one colour per line across both axes
    if ndcg is not None:
        for system in ndcg.columns:
            left.plot(ndcg.index, ndcg[system], marker="o", color=next(colours), label=f"{system} nDCG@3")
        left.set_ylabel("nDCG@3")
        axes.append(left)
    if meteor is not None:
        right = left.twinx() if ndcg is not None else left
        for system in meteor.columns:
            right.plot(
                meteor.index,
                meteor[system],
                marker="s",
                linestyle="--",
                color=next(colours),
                label=f"{system} METEOR",
            )
        right.set_ylabel("METEOR")
        axes.append(right)
    handles = [h for ax in dict.fromkeys(axes) for h in ax.get_legend_handles_labels()[0]]
    labels = [h.get_label() for h in handles]
    left.legend(handles, labels, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    left.set_title("Retrieval and answer quality by turn depth")
    return _save(figure, path)


def length_plot(lengths: pd.DataFrame, path: str | Path) -> Path:
    """Mean answer length in words against the generator's minimum length (Fig. 2).

    Args:
        lengths: columns ``min_length``, ``words`` and optionally ``system`` (one line per system).
    """
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(6, 4))
    groups = lengths.groupby("system") if "system" in lengths.columns else [("answers", lengths)]
    for system, group in groups:
        group = group.sort_values("min_length")
        ax.plot(group["min_length"], group["words"], marker="o", label=str(system))
    top = float(max(lengths["min_length"].max(), lengths["words"].max()))
    ax.plot([0, top], [0, top], color="grey", linestyle=":", label="length = min length")
    ax.set_xlabel("minimum length (tokens)")
    ax.set_ylabel("mean answer length (words)")
    ax.legend(fontsize="small")
    ax.set_title("Answer length vs minimum length")
    return _save(figure, path)


def method_gamma_plot(
    scores: pd.DataFrame, path: str | Path, measures: tuple[str, ...] = ("ROUGE-L", "METEOR")
) -> Path:
    """Bars of each selection method (and γ) on ``measures`` (Fig. 4).

    Args:
        scores: one row per system with columns ``method``, ``gamma`` (NaN where the method has none) and the
            measures.
    """
    import numpy as np

    plt = _pyplot()
    measures = tuple(m for m in measures if m in scores.columns)
    if not measures:
        raise ValueError("no measure to plot")
    rank = {method: i for i, method in enumerate(METHOD_ORDER)}
    ordered = scores.assign(_order=[rank.get(m, len(rank)) for m in scores["method"]]).sort_values(
        ["_order", "method", "gamma"], na_position="first"
    )
    labels = [
        method.upper() if gamma != gamma else f"{method.upper()} γ={gamma:g}"  # gamma != gamma: NaN
        for method, gamma in zip(ordered["method"], ordered["gamma"], strict=True)
    ]
    x = np.arange(len(labels))
    width = 0.8 / len(measures)
    figure, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels)), 4))
    for i, measure in enumerate(measures):
        ax.bar(x + (i - (len(measures) - 1) / 2) * width, ordered[measure], width, label=measure)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylabel("score (%)")
    ax.legend(fontsize="small")
    ax.set_title("Selection method × γ")
    return _save(figure, path)


class SelectorSettings(NamedTuple):
    """The selection method of a system, its γ where it has one, and any further variant (e.g. ``ep``)."""

    method: str | None
    gamma: float | None
    variant: str = ""


def selector_settings(record: dict[str, Any], name: str) -> SelectorSettings:
    """The selection settings of an answers file: from ``record["config"]["selector"]`` where its records carry
    it, else from the system's name: ``eg-g0.25``, ``lmd-er-g0.75``, ``eg.25+ep`` (bench/answers.py labels)."""
    selector = (record.get("config") or {}).get("selector")
    if isinstance(selector, dict) and selector.get("name"):
        gamma = selector.get("gamma")
        extra = sorted(k for k in selector if k not in ("name", "gamma", "candidates", "n"))
        return SelectorSettings(
            str(selector["name"]), float(gamma) if isinstance(gamma, int | float) else None, "+".join(extra)
        )
    method, gamma, variant = None, None, []
    for token in re.split(r"[-_+]", name.lower()):
        if method is None and (found := _NAME_METHOD.match(token)):
            method = found.group(1)
            gamma = float(found.group(2)) if found.group(2) else gamma
        elif found := _NAME_GAMMA.match(token):
            gamma = float(found.group(1))
        elif method is not None:
            variant.append(token)
    return SelectorSettings(method, gamma, "+".join(variant))


def sweep_plot(points: pd.DataFrame, axes: Sequence[str], measures: Sequence[str], path: str | Path) -> Path:
    """Each measure (one panel each) against the first swept setting, one line per combination of the others.

    Args:
        points: one row per sweep point: a column per swept setting (``axes``) and per measure.
        axes: the swept settings, the first on the x axis.
        measures: the measures to plot (those missing from ``points`` are left out).
    """
    import pandas as pd

    plt = _pyplot()
    measures = [m for m in measures if m in points.columns]
    if not measures:
        raise ValueError("no measure to plot")
    x, others = axes[0], list(axes[1:])
    numeric = pd.to_numeric(points[x], errors="coerce")
    figure, panels = plt.subplots(1, len(measures), figsize=(4.5 * len(measures), 3.6), squeeze=False)
    groups = points.groupby(others, sort=False) if others else [((), points)]
    for panel, measure in zip(panels[0], measures, strict=True):
        for key, group in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = (
                ", ".join(f"{a.rsplit('.', 1)[-1]}={v}" for a, v in zip(others, key, strict=True)) or measure
            )
            xs = numeric[group.index] if numeric.notna().all() else group[x]
            panel.plot(xs, group[measure], marker="o", label=label)
        panel.set_xlabel(x)
        panel.set_title(measure)
        if others:
            panel.legend(fontsize="small")
    figure.suptitle("Sweep")
    return _save(figure, path)
