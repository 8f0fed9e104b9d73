"""`cast sweep`: a grid of settings run from one shared pass, written and compared like `cast run` outputs."""

import pytest

from cast.errors import ConfigError
from cast.sweep import grid_points, stop_point


def test_grid_points_are_every_combination_named_by_their_settings():
    points = grid_points(["selector.gamma=0,0.5", "summarizer.words=20,50"])
    assert [p.name for p in points] == [
        "gamma=0,words=20",
        "gamma=0,words=50",
        "gamma=0.5,words=20",
        "gamma=0.5,words=50",
    ]
    assert points[1].overrides == ("selector.gamma=0", "summarizer.words=50")
    # Keys that end alike are named in full.
    assert grid_points(["selector.n=2", "ptkb.n=1"])[0].name == "selector.n=2,ptkb.n=1"


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (["selector.gamma"], "give KEY=VALUE1,VALUE2"),
        (["selector.gamma=0,,1"], "give KEY=VALUE1,VALUE2"),
        (["selector.gamma=0", "selector.gamma=1"], "names selector.gamma twice"),
        (["selector.gamma=0,0"], "repeats a value"),
        ([], "at least one --grid"),
    ],
)
def test_a_malformed_grid_is_refused(grid, message):
    with pytest.raises(ConfigError, match=message):
        grid_points(grid)


def test_the_shared_pass_stops_as_late_as_the_swept_stages_allow():
    def configs(selector="eg", responses="topics"):
        return [{"selector": {"name": selector}, "history_responses": responses}]

    assert stop_point(grid_points(["selector.gamma=0,1"]), configs()) == "link"
    assert stop_point(grid_points(["summarizer.words=20,50"]), configs("o")) == "rerank"  # O links nothing
    assert stop_point(grid_points(["linker.name=none,dictionary"]), configs()) == "rerank"
    assert stop_point(grid_points(["reranker.depth=10,100"]), configs()) is None
    assert stop_point(grid_points(["selector.gamma=0,1"]), configs(responses="answers")) is None


def test_a_setting_both_swept_and_set_is_said_once_and_the_grid_holds(tmp_path, caplog):
    from cast.cli import main

    topics = tmp_path / "none.json"
    grid = ["--grid", "selector.gamma=0,0.5", "--set", "selector={gamma: 0.3}", "--set", "selector.n=2"]
    assert (
        main(["sweep", "--topics", str(topics), "--output", str(tmp_path / "out"), *grid]) == 1
    )  # no topics
    assert caplog.messages == ["selector.gamma is given twice (--set, then --grid): the grid's values hold"]
