"""Values that are not finite, on the fixture index: refused before any work and never blamed on the index."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_audit import BASELINE, cast, one_error_line
from test_faults_inputs import CONVERSATIONS

from cast.errors import ConfigError


def test_a_grid_of_a_value_that_is_not_finite_is_refused_before_any_work(capsys, core_index, tmp_path):
    out = tmp_path / "sweep"
    code, _, err = cast(
        capsys, "sweep", "--index", core_index, *BASELINE, "--topics", CONVERSATIONS,
        "--grid", "selector.gamma=0,.nan", "--output", out, "--qrels", Path(__file__).parent.parent / "fixtures/eval/toy.qrels",
    )  # fmt: skip
    assert code == 1 and "is not a finite number" in one_error_line(err)
    assert not list(out.glob("*.run"))


def test_a_stage_built_in_code_refuses_a_setting_that_is_not_finite(core_index):
    from cast.core.registry import build_stage
    from cast.infra.resources import Resources

    for kind, section in (("selector", {"name": "eg", "gamma": float("nan")}), ("first_stage", {"name": "lmd", "mu": float("inf")})):  # fmt: skip
        with pytest.raises(ConfigError, match=rf"{kind}\.\w+ must be a finite number, got (nan|inf)"):
            build_stage(kind, section, Resources({"index": str(core_index)}))


def test_the_first_stage_with_an_infinite_mu_is_never_blamed_on_the_index(capsys, core_index, tmp_path):
    code, _, err = cast(
        capsys, "run", "--index", core_index, *BASELINE, "--topics", CONVERSATIONS,
        "--set", "first_stage.mu=.inf", "--output", tmp_path / "r",
    )  # fmt: skip
    line = one_error_line(err)
    assert code == 1 and "first_stage.mu" in line and "damaged" not in line and "--overwrite" not in line
