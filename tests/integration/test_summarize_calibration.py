"""Length calibration: the search on a fake generator with a known length curve, the outputs, the command."""

from __future__ import annotations

import argparse
import json
import os

import pytest
import tiny_models
import yaml

from cast.commands import summarize as cli
from cast.core.config import load_config
from cast.core.records import Passage, ScoredPassage, Selection, to_dict
from cast.errors import ConfigError
from cast.summarize import calibration as cal

os.environ.setdefault("HF_HUB_OFFLINE", "1")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class FakeGenerator:
    """Answers average ``10 + 0.7 * min_length`` words; counts how often each length is asked for."""

    def __init__(self):
        self.calls: list[int] = []

    def __call__(self, min_length: int) -> float:
        self.calls.append(min_length)
        return 10 + 0.7 * min_length


def test_the_sweep_then_bisection_finds_the_closest_integer():
    generator = FakeGenerator()
    result = cal.calibrate_min_length(generator, 50, range(0, 151, 10))
    # 10 + 0.7 m = 50 at m = 57.14: 57 gives 49.9 words, 58 gives 50.6.
    assert result.chosen == cal.CalibrationPoint(57, pytest.approx(49.9))
    assert sorted(generator.calls) == sorted(set(generator.calls))  # each length is generated once
    assert set(generator.calls) == set(range(0, 151, 10)) | {55, 57, 58}
    assert [p.min_length for p in result.points] == sorted(set(generator.calls))


def test_without_refinement_the_closest_grid_point_is_chosen():
    result = cal.calibrate_min_length(FakeGenerator(), 50, [0, 30, 60, 90], refine=False)
    assert result.chosen.min_length == 60  # 52 words, against 31 at 30
    assert len(result.points) == 4


@pytest.mark.parametrize(("target", "expected"), [(5, 0), (500, 100)])
def test_a_target_out_of_reach_gives_the_nearest_end(target, expected):
    assert cal.calibrate_min_length(FakeGenerator(), target, [0, 50, 100]).chosen.min_length == expected


def test_a_curve_that_levels_off_is_handled():
    # Real generators stop growing once min_length exceeds what the input supports.
    result = cal.calibrate_min_length(lambda m: min(20 + m, 60), 70, range(0, 101, 20))
    assert result.chosen.min_length == 40  # the first length reaching the plateau; ties go to the smaller


def test_grids_parse_and_bad_ones_say_how():
    assert cal.parse_grid("0:20:10") == [0, 10, 20]
    assert cal.parse_grid("56, 20") == [56, 20]
    for bad in ("0:20", "a,b", "20:0:5", "0:10:0"):
        with pytest.raises(ConfigError, match="START:STOP:STEP"):
            cal.parse_grid(bad)
    with pytest.raises(ConfigError, match="non-negative"):
        cal.calibrate_min_length(FakeGenerator(), 50, [])


def test_table_tsv_and_plot(tmp_path):
    result = cal.calibrate_min_length(FakeGenerator(), 50, [40, 60], refine=False)
    table = cal.format_table(result)
    assert "        60       52.0  <- chosen" in table
    cal.write_table(result, tmp_path / "t.tsv")
    assert (tmp_path / "t.tsv").read_text().splitlines() == [
        "min_length\taverage_words",
        "40\t38.000",
        "60\t52.000",
    ]
    cal.plot(result, tmp_path / "sub" / "f.png", "bart: words vs min_length")
    assert (tmp_path / "sub" / "f.png").read_bytes().startswith(b"\x89PNG")
    assert not list((tmp_path / "sub").glob("*.tmp*"))


def test_the_calibrated_config_loads_with_the_chosen_min_length(tmp_path):
    source = tmp_path / "mine.yaml"
    source.write_text("base: paper\nsummarizer:\n  name: seq2seq\n  model: facebook/bart-large-cnn\n")
    result = cal.calibrate_min_length(FakeGenerator(), 50, [40, 60], refine=False)
    section = {"name": "seq2seq", "model": "facebook/bart-large-cnn", "with_query": True}

    derived = tmp_path / "mine-50w.yaml"
    cal.write_text_atomic(derived, cal.calibrated_config(source, derived, section, result, "50 turns"))
    assert derived.read_text().startswith("# Length calibration")
    # the paper profile's settings of the same stage (dtype) carry over
    assert load_config(derived)["summarizer"] == {**section, "dtype": "float32", "min_length": 60}
    assert load_config(derived)["reranker"]["name"] == "monobert"  # the rest comes from the base chain

    cal.write_text_atomic(source, cal.calibrated_config(source, source, section, result, "50 turns"))
    assert yaml.safe_load(source.read_text()) == {
        "base": "paper",
        "summarizer": {**section, "min_length": 60},
    }


def test_calibrate_command_on_a_tiny_model_and_an_answers_file(tmp_path):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    folder = tiny_models.seq2seq(tmp_path / "bart", "bart")
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    with torch.no_grad():  # a model that stops as early as it is allowed to: words grow with min_length
        model.final_logits_bias[0, model.config.eos_token_id] = 100.0
    model.save_pretrained(folder)
    passage = "lung cancer symptoms come from smoking and the effects of smoking on the throat"
    selection = Selection((ScoredPassage(Passage("p1", passage), 1.0),), "o")
    answers = tmp_path / "run.answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"query": q, "selection": to_dict(selection)}) + "\n" for q in "abc")
    )
    config = tmp_path / "tiny.yaml"
    config.write_text(f"base: offline\nsummarizer:\n  name: seq2seq\n  model: {folder}\n  batch_size: 3\n")

    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        ["calibrate", "--config", str(config), "--answers", str(answers), "--target-words", "5",
         "--min-lengths", "0:12:4", "--report-dir", str(tmp_path / "report"), "--set", "device=cpu"]
    )  # fmt: skip
    assert args.func(args) == 0

    calibrated = load_config(tmp_path / "tiny-5w.yaml")
    # min_length counts the decoder's start token, and the end token may come at position min_length:
    # min_length m gives m - 1 words, so 5 words need 6.
    assert calibrated["summarizer"]["min_length"] == 6
    assert calibrated["summarizer"]["model"] == str(folder)
    assert (tmp_path / "report" / "bart-5w.png").is_file()
    assert (tmp_path / "report" / "bart-5w.tsv").read_text().startswith("min_length\taverage_words\n0\t")


def test_an_answers_file_without_selections_is_a_data_error(tmp_path):
    from cast.errors import DataFormatError

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q"}\n')
    with pytest.raises(DataFormatError, match="bad.jsonl:1"):
        cli.read_selections(bad)
