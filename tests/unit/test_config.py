import logging

import pytest

from cast.core.config import CONFIG_DIR, config_path, load_config, merge
from cast.core.registry import STAGES, stage_class
from cast.errors import ConfigError


def test_offline_is_default_and_tagged():
    config = load_config()
    assert config["tag"] == "offline"
    assert config["first_stage"] == {"name": "lmd", "mu": 1000, "k": 1000}


def test_set_overrides_are_yaml_typed():
    config = load_config("offline", ["first_stage.mu=1500", "selector.gamma=0.5", "index=/tmp/x"])
    assert config["first_stage"]["mu"] == 1500
    assert config["selector"]["gamma"] == 0.5
    assert config["index"] == "/tmp/x"


def test_switching_a_stage_keeps_the_settings_it_declares_and_says_which_it_leaves_out(caplog):
    with caplog.at_level(logging.INFO, logger="cast.core.config"):
        config = load_config("offline", ["first_stage.name=bm25"])
    assert config["first_stage"] == {"name": "bm25", "k": 1000}  # lmd's mu is no BM25 setting
    [line] = caplog.messages
    assert (
        line
        == "--set first_stage.name=bm25: left out the config's lmd setting(s) mu, which bm25 does not take"
    )


def test_naming_the_profiles_own_stage_again_gives_its_settings_back(caplog):
    with caplog.at_level(logging.WARNING, logger="cast.core.config"):
        config = load_config("offline", ["summarizer.name=topk_trim", "summarizer.name=entity_extractive"])
    assert config["summarizer"] == load_config("offline")["summarizer"]
    assert config["summarizer"]["words"] == 70
    assert caplog.messages == [
        "--set summarizer.name is given twice (summarizer.name=topk_trim, then summarizer.name=entity_extractive): "
        "the last holds"
    ]


def test_settings_given_for_a_stage_apply_to_the_stage_finally_named_in_any_order():
    words = ["summarizer.words=30", "summarizer.name=topk_trim"]
    assert load_config("offline", words)["summarizer"] == {"name": "topk_trim", "words": 30}
    assert load_config("offline", words[::-1])["summarizer"] == {"name": "topk_trim", "words": 30}
    # A section given as a mapping is one --set per key, so the order still does not matter.
    for overrides in (
        ["summarizer.words=50", "summarizer={name: entity_extractive}"],
        ["summarizer={name: entity_extractive}", "summarizer.words=50"],
        ["summarizer={name: entity_extractive, words: 50}"],
    ):
        assert load_config("offline", overrides)["summarizer"] == {
            **load_config("offline")["summarizer"],
            "words": 50,
        }


def test_a_setting_given_for_a_stage_that_does_not_take_it_fails_when_checked():
    from cast.core.registry import check_section

    config = load_config("offline", ["summarizer.name=topk_trim", "summarizer.entity_weight=0.5"])
    with pytest.raises(
        ConfigError, match="summarizer topk_trim: unknown setting.*entity_weight; allowed: words"
    ):
        check_section("summarizer", config["summarizer"])


def test_paper_profile_inherits_offline_and_replaces_stages():
    config = load_config("paper")
    assert config["tag"] == "paper"
    assert config["rewriter"]["model"] == "castorini/t5-base-canard"
    assert config["first_stage"]["name"] == "lmd"  # from the base


def test_paper_profile_runs_the_published_models_as_their_references_do():
    config = load_config("paper")
    assert config["rewriter"]["input_format"] == "castorini"  # what t5-base-canard was trained on
    assert config["reranker"]["with_title"] is False  # pygaggle scores the text alone
    for stage in ("rewriter", "reranker", "summarizer"):
        assert config[stage]["dtype"] == "float32", stage
    assert config["knowledge_base"]["total"] == 6_000_000  # a documented |D|, never counted on the endpoint
    text = config_path("paper").read_text()
    assert "NOT calibrated" in text and "cast calibrate --config paper" in text  # min_length 56 says so


def test_merge_replaces_a_section_whose_stage_changes():
    assert merge({"s": {"name": "a", "x": 1}}, {"s": {"name": "b"}}) == {"s": {"name": "b"}}
    assert merge({"s": {"name": "a", "x": 1}}, {"s": {"y": 2}}) == {"s": {"name": "a", "x": 1, "y": 2}}


@pytest.mark.parametrize(
    "name, overrides, message",
    [
        ("no-such-config", [], "no config 'no-such-config'"),
        ("offline", ["novalue"], "--set expects KEY=VALUE"),
        ("offline", ["first_stage.mu.x=1"], "'mu' is a value, not a section"),
    ],
)
def test_bad_configs_are_named(name, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(name, overrides)


def test_unknown_stage_and_setting_are_clear_errors():
    from cast.core.registry import build_stage
    from cast.infra.resources import Resources

    with pytest.raises(ConfigError, match="unknown reranker 'bert'; choose one of"):
        stage_class("reranker", "bert")
    with pytest.raises(ConfigError, match="unknown setting.*mew.*allowed: .*mu"):
        build_stage("first_stage", {"name": "lmd", "mew": 5}, Resources({}))


def test_every_config_names_registered_stages():
    for path in CONFIG_DIR.glob("*.yaml"):
        config = load_config(path)
        for kind in STAGES:
            if kind in config:
                assert config[kind]["name"] in STAGES[kind], (path, kind)
