"""Paired significance tests between two systems scored on the same turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

SIGNIFICANCE_LEVEL = 0.05
SIGNIFICANT_MARK = "†"
RANDOMISATION_ROUNDS = 10_000
# Multiple-comparison corrections offered when several systems are tested against one baseline.
CORRECTIONS = ("holm",)


@dataclass(frozen=True)
class PairedTest:
    """The outcome of comparing a system with a baseline on the same turns.

    Attributes:
        n: the number of paired turns.
        mean_difference: mean of (system - baseline).
        t_test_p: two-sided p-value of the paired t-test (scipy's ``ttest_rel``); 1.0 when all differences are 0.
        randomisation_p: two-sided p-value of the paired randomisation (sign-flip) test.
    """

    n: int
    mean_difference: float
    t_test_p: float
    randomisation_p: float

    def significant(self, level: float = SIGNIFICANCE_LEVEL) -> bool:
        """Both tests reject equality at ``level`` (the t-test's normality assumption is then not decisive)."""
        return self.t_test_p < level and self.randomisation_p < level


def randomisation_test(
    system: np.ndarray, baseline: np.ndarray, rounds: int = RANDOMISATION_ROUNDS, seed: int = 0
) -> float:
    """Two-sided paired randomisation test (Smucker, Allan and Carterette, CIKM 2007).

    Under the null hypothesis the two systems' scores on a turn are exchangeable, so each per-turn difference keeps
    or flips its sign with probability 1/2. The p-value is the share of ``rounds`` random sign assignments whose
    absolute mean difference is at least the observed one, counting the observed assignment:
    ``(hits + 1) / (rounds + 1)``.
    """
    import numpy as np

    differences = np.asarray(system, dtype=float) - np.asarray(baseline, dtype=float)
    observed = abs(differences.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(rounds, differences.size))
    resampled = np.abs((signs * differences).mean(axis=1))
    # A tolerance so that float noise in the sums does not turn an exact tie into a miss.
    hits = int(np.count_nonzero(resampled >= observed - 1e-12))
    return (hits + 1) / (rounds + 1)


def paired_test(system: np.ndarray, baseline: np.ndarray, seed: int = 0) -> PairedTest:
    """Paired t-test and randomisation test of ``system`` against ``baseline`` (same turns, same order)."""
    import numpy as np
    from scipy import stats

    system = np.asarray(system, dtype=float)
    baseline = np.asarray(baseline, dtype=float)
    if system.shape != baseline.shape:
        raise ValueError(f"paired scores differ in length: {system.shape} vs {baseline.shape}")
    differences = system - baseline
    if system.size < 2:
        t_p = 1.0  # no test possible on fewer than two pairs
    elif np.allclose(differences, differences[0], rtol=0, atol=1e-12):
        # No spread (up to float noise), so the t statistic is undefined: identical systems do not differ, a
        # constant shift does.
        t_p = 1.0 if abs(differences[0]) <= 1e-12 else 0.0
    else:
        t_p = float(stats.ttest_rel(system, baseline).pvalue)
    return PairedTest(
        n=int(system.size),
        mean_difference=float(differences.mean()) if differences.size else 0.0,
        t_test_p=t_p,
        randomisation_p=randomisation_test(system, baseline, seed=seed) if system.size else 1.0,
    )


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm, 1979), in the order given.

    With the m p-values sorted ascending, p(1) <= ... <= p(m), the adjusted value of the i-th is
    ``max over j <= i of min(1, (m - j + 1) * p(j))``; rejecting where the adjusted value is below the level
    keeps the family-wise error rate at that level.

    Example:
        >>> holm_bonferroni([0.01, 0.04, 0.03])
        [0.03, 0.06, 0.06]
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
