"""Gradient-boosted tree ensembles kept as JSON in the repository (the Wikipedia linker's decision, the term
selection rewriter, the learnt sentence scorer): scikit-learn trains them, :func:`export` writes their arrays, :func:`load_tree_model` reads
a model file and :class:`TreeEnsemble` scores without scikit-learn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from cast.errors import DataFormatError
from cast.formats.textfiles import RECORD_BYTES, parse_json, read_text

Model = TypeVar("Model")


class TreeEnsemble:
    """A gradient-boosted binary classifier or regressor read from JSON (scikit-learn's trees, exported as arrays).

    Args:
        trees: each ``{"left": [...], "right": [...], "feature": [...], "threshold": [...], "value": [...]}``
            (a leaf has ``left == -1``).
        init: the ensemble's initial log-odds (a classifier) or prediction (a regressor).
        rate: the learning rate the trees' values are scaled by.
    """

    def __init__(self, trees: Sequence[dict[str, list]], init: float, rate: float):
        # Each tree is laid out as a complete binary tree of the ensemble's depth (a leaf above the last level
        # becomes nodes that always go left), so a level is one vectorised step over every tree and row.
        self.depth = max((_depth(tree, 0) for tree in trees), default=0)
        internal, leaves = 2**self.depth - 1, 2**self.depth
        # 32-bit indexes: np.take over flat arrays is a quarter faster than two-dimensional fancy indexing.
        self.feature = np.zeros((len(trees), max(internal, 1)), dtype=np.int32)
        self.threshold = np.full((len(trees), max(internal, 1)), np.inf)
        self.value = np.zeros((len(trees), leaves))
        for number, tree in enumerate(trees):
            self._lay_out(number, tree, 0, 0, 0)
        self.init = float(init)
        self.rate = float(rate)

    def _lay_out(self, number: int, tree: dict[str, list], node: int, position: int, level: int) -> None:
        if tree["left"][node] == -1:
            first = position
            for _ in range(self.depth - level):
                first = 2 * first + 1  # the leftmost leaf under position: where "always left" ends
            leaf = first - (2**self.depth - 1)
            self.value[number, leaf] = tree["value"][node]
            return
        self.feature[number, position] = tree["feature"][node]
        self.threshold[number, position] = tree["threshold"][node]
        self._lay_out(number, tree, tree["left"][node], 2 * position + 1, level + 1)
        self._lay_out(number, tree, tree["right"][node], 2 * position + 2, level + 1)

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """P(positive) for each row of features, a classifier's margins through the logistic function."""
        # A margin below about -709 overflows exp to inf, and 1 / inf is the right 0.
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-self.margins(rows)))

    def margins(self, rows: np.ndarray) -> np.ndarray:
        """The ensemble's raw output for each row: a classifier's log-odds, a regressor's prediction."""
        rows = np.asarray(rows, dtype=np.float64)
        count, width = rows.shape
        trees, internal = self.feature.shape
        features, thresholds, flat = self.feature.ravel(), self.threshold.ravel(), rows.ravel()
        tree_start = (np.arange(trees, dtype=np.int32) * internal)[None, :]
        row_start = (np.arange(count, dtype=np.int32) * width)[:, None]
        position = np.zeros((count, trees), dtype=np.int32)
        for _ in range(self.depth):
            node = tree_start + position
            position = 2 * position + 1 + (flat.take(row_start + features.take(node)) > thresholds.take(node))
        leaves = position - (2**self.depth - 1)
        return self.init + self.rate * self.value[np.arange(trees)[None, :], leaves].sum(axis=1)


def _depth(tree: dict[str, list], node: int) -> int:
    if tree["left"][node] == -1:
        return 0
    return 1 + max(_depth(tree, tree["left"][node]), _depth(tree, tree["right"][node]))


def export(model: Any) -> dict[str, Any]:
    """A fitted scikit-learn ``GradientBoostingClassifier`` (binary) or ``GradientBoostingRegressor`` (squared
    error) as the arrays :class:`TreeEnsemble` reads."""
    trees = []
    for estimator in model.estimators_[:, 0]:
        tree = estimator.tree_
        trees.append(
            {
                "left": tree.children_left.tolist(),
                "right": tree.children_right.tolist(),
                "feature": np.maximum(tree.feature, 0).tolist(),
                "threshold": [round(float(t), 6) for t in tree.threshold],
                "value": [round(float(v), 6) for v in tree.value[:, 0, 0]],
            }
        )
    if hasattr(model.init_, "class_prior_"):  # a classifier starts from the prior's log-odds
        prior = model.init_.class_prior_[1]
        init = float(np.log(prior / (1 - prior)))
    else:  # a regressor from the training targets' mean
        init = float(np.ravel(model.init_.constant_)[0])
    return {"trees": trees, "init": init, "rate": model.learning_rate}


def load_tree_model(
    path: str | Path,
    features: tuple[str, ...],
    build: Callable[[TreeEnsemble, dict[str, Any]], Model],
    what: str,
    retrain: str,
) -> Model:
    """A model file read: ``build(ensemble, data)`` with the file's ensemble and all its fields.

    Args:
        features: the feature order the code computes; a file trained on another is refused.
        what: what the file should be, for the error (e.g. ``linker model``).
        retrain: the command that (re)trains one, for the errors.

    Raises:
        DataFormatError: the file is missing, not such a model, or trained on other features.
    """
    path = Path(path)
    if not path.exists():
        raise DataFormatError(path, f"no such model file; train one with {retrain}")
    data = parse_json(read_text(path, RECORD_BYTES, what), path, what=f"a {what}")
    try:
        trained_on = tuple(data["features"])
        model = build(TreeEnsemble(data["trees"], data["init"], data["rate"]), data)
    except (ValueError, KeyError, TypeError) as e:
        raise DataFormatError(path, f"not a {what} ({type(e).__name__}: {e})") from None
    if trained_on != features:
        raise DataFormatError(path, f"was trained on other features; retrain it with {retrain}")
    return model
