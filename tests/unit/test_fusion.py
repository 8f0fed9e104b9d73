"""Score fusion on hand-computed examples."""

from __future__ import annotations

import pytest

from cast.rank.fusion import interpolate, normalise


def test_minmax_maps_to_the_unit_interval():
    assert normalise([2.0, 4.0, 3.0]).tolist() == pytest.approx([0.0, 1.0, 0.5])


def test_zscore_centres_and_scales():
    # mean 3, population deviation sqrt(2/3)
    assert normalise([2.0, 4.0, 3.0], "zscore").tolist() == pytest.approx([-1.224745, 1.224745, 0.0])


@pytest.mark.parametrize("method", ["minmax", "zscore"])
def test_all_equal_or_no_values_carry_no_preference(method):
    assert normalise([5.0, 5.0], method).tolist() == [0.0, 0.0]
    assert normalise([], method).tolist() == []


def test_interpolate_weighs_the_first_list():
    # first -> [0, 1, .5], second -> [1, 0, 0]
    fused = interpolate([2.0, 4.0, 3.0], [9.0, 1.0, 1.0], 0.25)
    assert fused.tolist() == pytest.approx([0.75, 0.25, 0.125])
    assert interpolate([2.0, 4.0], [9.0, 1.0], 1.0).tolist() == pytest.approx([0.0, 1.0])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="normalisation"):
        normalise([1.0], "rank")
    with pytest.raises(ValueError, match="2 scores with 1"):
        interpolate([1.0, 2.0], [1.0], 0.5)


def test_reciprocal_rank_keeps_only_the_order_and_ties_share_the_better_rank():
    assert normalise([3.0, 1.0, 3.0, 2.0], "reciprocal_rank").tolist() == pytest.approx(
        [1 / 61, 1 / 64, 1 / 61, 1 / 63]
    )
    # Gaps between scores do not count: the same order gives the same values.
    assert (
        normalise([100.0, 0.1, 0.0], "reciprocal_rank").tolist()
        == normalise([3.0, 2.0, 1.0], "reciprocal_rank").tolist()
    )


def test_weighted_reciprocal_rank_fusion_by_hand():
    # first list ranks a > b > c, second c > a > b; weight 0.25 on the first.
    fused = interpolate([3.0, 2.0, 1.0], [5.0, 1.0, 9.0], 0.25, "reciprocal_rank")
    expected = [0.25 / 61 + 0.75 / 62, 0.25 / 62 + 0.75 / 63, 0.25 / 63 + 0.75 / 61]
    assert fused.tolist() == pytest.approx(expected)
