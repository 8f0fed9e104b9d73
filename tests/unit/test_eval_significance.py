"""Paired significance tests."""

from __future__ import annotations

import numpy as np
import pytest

from cast.evaluate.significance import paired_test, randomisation_test


def test_identical_systems_do_not_differ():
    scores = np.array([0.1, 0.5, 0.3, 0.9])
    test = paired_test(scores, scores)
    assert test.t_test_p == 1.0
    assert test.randomisation_p == 1.0
    assert not test.significant()


def test_consistent_improvement_is_significant():
    baseline = np.linspace(0.1, 0.6, 12)
    system = baseline + np.array([0.1, 0.12, 0.09, 0.11] * 3)
    test = paired_test(system, baseline)
    assert test.mean_difference == pytest.approx(0.105)
    assert test.significant()
    # With 12 turns all differences positive: P(|mean| >= observed) under sign flips is about 2/4096.
    assert test.randomisation_p < 0.01


def test_t_test_is_scipys_paired_t_test():
    from scipy import stats

    rng = np.random.default_rng(1)
    a, b = rng.random(30), rng.random(30)
    assert paired_test(a, b).t_test_p == pytest.approx(stats.ttest_rel(a, b).pvalue)


def test_randomisation_p_is_exact_for_few_pairs():
    # 3 pairs with distinct differences: of the 8 sign patterns, the 2 all-same ones reach the observed mean.
    p = randomisation_test(np.array([1.0, 2.0, 3.0]), np.zeros(3), rounds=20_000, seed=3)
    assert p == pytest.approx(2 / 8, abs=0.02)


def test_randomisation_is_reproducible():
    rng = np.random.default_rng(0)
    a, b = rng.random(20), rng.random(20)
    assert randomisation_test(a, b, seed=7) == randomisation_test(a, b, seed=7)


def test_lengths_must_match():
    with pytest.raises(ValueError, match="differ in length"):
        paired_test(np.zeros(3), np.zeros(4))
