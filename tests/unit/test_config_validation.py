"""Bad settings and arguments fail at the door with one clear line, before models, indexes or the JVM load."""

from pathlib import Path

import pytest

from cast.cli import main as cast_main
from cast.core.config import CONFIG_DIR, load_config
from cast.core.registry import STAGES, build_stage, stage_class
from cast.core.settings import Setting, check_value
from cast.errors import ConfigError, IndexUnavailableError
from cast.infra.jvm import check_index
from cast.infra.resources import Resources


def cli_error(capsys, argv):
    """The one line ``cast`` prints on stderr for a failing command."""
    assert cast_main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    "value, annotation, message",
    [
        ("abc", float, "first_stage.x must be float, got 'abc'"),
        (True, int, "first_stage.x must be int, got True"),  # a bool is not an int here
        (1, bool, "first_stage.x must be bool, got 1"),
        (None, int, "first_stage.x must be int, got None"),
        (3, str | None, "first_stage.x must be str or null, got 3"),
        (1.5, int | None, r"first_stage.x must be int or null, got 1.5"),
    ],
)
def test_a_setting_of_the_wrong_type_is_named(value, annotation, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        check_value("first_stage", Setting("x", annotation, None), value)


@pytest.mark.parametrize(
    "value, annotation",
    [(1500, float), (0.5, float), (3, int), (False, bool), ("x", str), (None, str | None),
     (None, int | None), ([1, 2], list[int]), ("anything", Path)],
)  # fmt: skip
def test_fitting_or_unchecked_settings_pass(value, annotation):
    check_value("kind", Setting("key", annotation, None), value)


def test_stage_settings_are_checked_when_the_stage_is_built():
    with pytest.raises(ConfigError, match=r"^first_stage.mu must be float, got 'abc'$"):
        build_stage("first_stage", {"name": "lmd", "mu": "abc"}, Resources({}))
    with pytest.raises(ConfigError, match=r"^selector.candidates must be int, got 'ten'$"):
        build_stage("selector", {"name": "o", "candidates": "ten"}, Resources({}))


def test_the_shipped_configs_fit_their_stages_settings():
    for path in CONFIG_DIR.glob("*.yaml"):
        config = load_config(path)
        for kind in STAGES:
            stage_class(kind, config[kind]["name"]).check_params(
                {k: v for k, v in config[kind].items() if k != "name"}
            )


@pytest.mark.parametrize(
    "section, message",
    [
        ({"name": "lmd", "k": 0}, r"first_stage.k must be in \[1, 2147483647\], got 0"),
        ({"name": "lmd", "k": -5}, r"first_stage.k must be in \[1, 2147483647\], got -5"),
        ({"name": "lmd", "k": 2**31}, r"first_stage.k must be in \[1, 2147483647\], got 2147483648"),
        ({"name": "lmd", "threads": 0}, "first_stage.threads must be at least 1, got 0"),
        ({"name": "lmd", "mu": 0}, "first_stage.mu must be above 0, got 0"),
        ({"name": "bm25", "k1": -0.1}, "first_stage.k1 must be at least 0, got -0.1"),
        ({"name": "bm25", "b": 1.5}, r"first_stage.b must be in \[0, 1\], got 1.5"),
        ({"name": "o", "candidates": 0}, "selector.candidates must be at least 1, got 0"),
        ({"name": "o", "gamma": 1.5}, r"selector.gamma must be in \[0, 1\], got 1.5"),
        ({"name": "eg", "alpha": 1.0}, r"selector.alpha must be in \(0, 1\), got 1.0"),
        ({"name": "o", "combine": "mix"}, "selector.combine must be one of reorder, interpolate, got 'mix'"),
        (
            {"name": "entity_extractive", "min_sentence_words": -1},
            "summarizer.min_sentence_words must be at least 0, got -1",
        ),  # any count
    ],
)
def test_settings_out_of_range_are_config_errors(section, message):
    kinds = {"o": "selector", "eg": "selector", "entity_extractive": "summarizer"}
    kind = kinds.get(section["name"], "first_stage")
    with pytest.raises(ConfigError, match=f"^{message}$"):
        build_stage(kind, section, Resources({}))  # no index: checked before the JVM starts


def test_an_unknown_top_level_key_is_an_error_listing_the_known_ones(tmp_path):
    with pytest.raises(
        ConfigError, match=r"^--set foo.bar=1: unknown top-level key\(s\) foo; known: index, .*selector"
    ):
        load_config("offline", ["foo.bar=1"])
    typo = tmp_path / "typo.yaml"
    typo.write_text("base: offline\nfirst_stag:\n  mu: 1500\n")
    with pytest.raises(ConfigError, match=r"typo.yaml: unknown top-level key\(s\) first_stag; known: "):
        load_config(typo)


def test_yaml_syntax_errors_name_file_and_line_on_one_line(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("base: offline\nfirst_stage:\n  mu: [1500\n  k: 10\nselector: {name: o\n")
    with pytest.raises(ConfigError) as caught:
        load_config(broken)
    message = str(caught.value)
    assert message.startswith(f"{broken}:4: not valid YAML: ")
    assert "\n" not in message and "<unicode string>" not in message
    with pytest.raises(ConfigError) as caught:
        load_config("offline", ["first_stage.mu=[1"])
    assert "\n" not in str(caught.value) and "<unicode string>" not in str(caught.value)


def test_explain_rejects_an_image_suffix_it_cannot_write_before_reading(tmp_path, capsys):
    missing_answers = tmp_path / "nowhere.answers.jsonl"  # not read: the suffix is checked first
    line = cli_error(
        capsys,
        ["explain", "--answers", str(missing_answers), "--qid", "1_1", "--out", str(tmp_path / "g.txt")],
    )
    assert line.endswith("g.txt: the image must end in .png, .svg, .pdf (e.g. graph.png)")


@pytest.mark.parametrize(
    "argument, message",
    [
        (["--target-words", "0"], "--target-words must be a positive number of words, got 0"),
        (["--target-words", "nan"], "--target-words must be a positive number of words, got nan"),
        (["--target-words", "50", "--sample", "-1"], "--sample must be 0 (all turns) or more, got -1"),
        (["--target-words", "50", "--min-lengths=-10,20"], "--min-lengths must give lengths of 0 or more"),
    ],
)
def test_calibrate_checks_its_numbers_before_loading_anything(capsys, tmp_path, argument, message):
    # The offline config's summarizer is not seq2seq: without the early check that would be the error.
    line = cli_error(capsys, ["calibrate", "--answers", str(tmp_path / "none.jsonl"), *argument])
    assert message in line


def test_the_default_index_place_says_to_pass_an_index_or_run_the_demo(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # the offline config's `index` is under ~/.cache
    default = load_config("offline")["index"]
    with pytest.raises(
        IndexUnavailableError, match=r"the default, .*pass --index PATH .* or run `cast demo`"
    ):
        check_index(default)
    with pytest.raises(IndexUnavailableError, match="build one with `cast index build"):
        check_index(tmp_path / "my-index")
