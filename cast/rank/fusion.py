"""Score fusion: two rankers' scores of the same items, normalised and interpolated.

Scores of different stages live on different scales (LMD log-likelihoods, cosine similarities, PageRank masses),
so each list is normalised per query before the weighted sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NORMALISATIONS = ("minmax", "zscore")


def normalise(values: Sequence[float] | np.ndarray, method: str = "minmax") -> np.ndarray:
    """``values`` on a common scale: ``minmax`` maps them to [0, 1], ``zscore`` to mean 0 and deviation 1.

    All-equal values map to 0 either way: they carry no preference.
    """
    if method not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {method!r}; use one of {', '.join(NORMALISATIONS)}")
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return array
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
