"""Score fusion: two rankers' scores of the same items, normalised and interpolated.

Scores of different stages live on different scales (LMD log-likelihoods, cosine similarities, PageRank masses),
so each list is normalised per query before the weighted sum. ``reciprocal_rank`` replaces each score by
``1 / (k + rank)`` (k = 60), so that the weighted sum is (weighted) reciprocal rank fusion (Cormack, Clarke and
Buettcher, SIGIR 2009): only the order of each list counts, not the gaps between its scores.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Literal

import numpy as np

# The normalisations, declared once: the re-ranker's setting takes its choices from here.
Normalisation = Literal["minmax", "zscore", "reciprocal_rank"]
NORMALISATIONS: tuple[str, ...] = typing.get_args(Normalisation)
RECIPROCAL_RANK_K = 60


def normalise(values: Sequence[float] | np.ndarray, method: str = "minmax") -> np.ndarray:
    """``values`` on a common scale: ``minmax`` maps them to [0, 1], ``zscore`` to mean 0 and deviation 1,
    ``reciprocal_rank`` to ``1 / (60 + rank)`` (rank 1 = the highest value; equal values share the better rank).

    All-equal values map to 0 with ``minmax`` and ``zscore``: they carry no preference.
    """
    if method not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {method!r}; use one of {', '.join(NORMALISATIONS)}")
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return array
    if method == "reciprocal_rank":
        # rank = 1 + how many values are strictly higher, so ties share a rank whatever their order.
        higher = np.searchsorted(np.sort(-array), -array, side="left")
        return 1.0 / (RECIPROCAL_RANK_K + 1 + higher)
    if method == "zscore":
        spread = array.std()
        return (array - array.mean()) / spread if spread > 0 else np.zeros_like(array)
    low, high = array.min(), array.max()
    return (array - low) / (high - low) if high > low else np.zeros_like(array)


def interpolate(
    first: Sequence[float] | np.ndarray,
    second: Sequence[float] | np.ndarray,
    weight: float,
    method: str = "minmax",
) -> np.ndarray:
    """``weight * norm(first) + (1 - weight) * norm(second)``, item by item (linear score fusion)."""
    if len(first) != len(second):
        raise ValueError(f"cannot interpolate {len(first)} scores with {len(second)}")
    return weight * normalise(first, method) + (1.0 - weight) * normalise(second, method)
