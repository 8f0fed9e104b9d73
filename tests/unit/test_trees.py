"""The JSON tree ensembles (cast/infra/trees.py): scoring by hand, and a scikit-learn model exported and read back."""

import numpy as np
import pytest

from cast.infra.trees import TreeEnsemble, export


def test_tree_ensemble_by_hand():
    # One stump: feature 0 <= 0.5 -> -1, else +2; init 0.5, rate 0.5.
    tree = {"left": [1, -1, -1], "right": [2, -1, -1], "feature": [0, 0, 0], "threshold": [0.5, 0, 0],
            "value": [0.0, -1.0, 2.0]}  # fmt: skip
    ensemble = TreeEnsemble([tree, tree], init=0.5, rate=0.5)
    p = ensemble.probabilities(np.array([[0.0], [1.0]]))
    assert p == pytest.approx([1 / (1 + np.exp(-(0.5 - 1.0))), 1 / (1 + np.exp(-(0.5 + 2.0)))])


def test_an_unbalanced_tree_is_followed_as_written():
    # node 0: x0 <= 0.5 ? leaf 1 (-1) : node 2; node 2: x1 <= 0.5 ? leaf 3 (+1) : leaf 4 (+3)
    tree = {"left": [1, -1, 3, -1, -1], "right": [2, -1, 4, -1, -1], "feature": [0, 0, 1, 0, 0],
            "threshold": [0.5, 0, 0.5, 0, 0], "value": [0, -1.0, 0, 1.0, 3.0]}  # fmt: skip
    ensemble = TreeEnsemble([tree], init=0.0, rate=1.0)
    raw = np.log(1 / ensemble.probabilities(np.array([[0, 9], [1, 0], [1, 1]])) - 1) * -1
    assert raw == pytest.approx([-1.0, 1.0, 3.0])


def test_an_exported_scikit_learn_model_scores_as_scikit_learn_does():
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(300, 3))
    labels = (rows[:, 0] + 0.5 * rows[:, 1] * rows[:, 2] > 0).astype(int)
    model = GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(rows, labels)
    data = export(model)
    ensemble = TreeEnsemble(data["trees"], data["init"], data["rate"])
    assert ensemble.probabilities(rows) == pytest.approx(model.predict_proba(rows)[:, 1], abs=1e-5)


def test_an_exported_scikit_learn_regressor_predicts_as_scikit_learn_does():
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(1)
    rows = rng.normal(size=(300, 3))
    targets = rows[:, 0] - rows[:, 1] * rows[:, 2]
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(rows, targets)
    data = export(model)
    ensemble = TreeEnsemble(data["trees"], data["init"], data["rate"])
    assert data["init"] == pytest.approx(targets.mean())
    assert ensemble.margins(rows) == pytest.approx(model.predict(rows), abs=1e-4)
