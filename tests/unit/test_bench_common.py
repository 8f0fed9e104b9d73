"""The benchmark scripts' shared plumbing (cast.benchmark.scripts): a wrong path is one error line naming it, and
bench/entities.py runs on a small sample (the scripts run as processes: test_bench_scripts.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from cast.benchmark.scripts import existing_path, run
from cast.errors import CastError, DataFormatError

REPO = Path(__file__).resolve().parents[2]


def test_existing_path_names_a_missing_path(tmp_path: Path) -> None:
    assert existing_path(str(tmp_path)) == tmp_path
    with pytest.raises(argparse.ArgumentTypeError, match=r"no such file or folder: .*nowhere.json"):
        existing_path(str(tmp_path / "nowhere.json"))


def test_run_reports_a_cast_error_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def main() -> int:
        raise DataFormatError("topics.json", "not JSON", 3)

    assert run(main) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(": error: topics.json:3: not JSON")


def test_entity_bench_turns_are_topped_up_from_a_small_sample(tmp_path: Path) -> None:
    entities = load_bench_script("entities")
    topics = tmp_path / "topics.json"
    turns = [
        {"manual_rewritten_utterance": f"q{n}", "provenance": ["p1"] if n == 0 else []} for n in range(5)
    ]
    topics.write_text(json.dumps([{"number": "1", "turn": turns}]))
    provenance = tmp_path / "provenance.jsonl"
    provenance.write_text(json.dumps({"id": "p1", "contents": "the provenance"}) + "\n")
    sample = [{"id": "s1", "title": "S", "contents": "a sample passage"}]
    found = entities.turns(topics, provenance, sample, count=3)
    assert [query for query, _ in found] == ["q0", "q1", "q2"]
    assert found[0][1] == ["the provenance"] + ["a sample passage"] * 9
    assert all(len(passages) == 10 for _, passages in found)


def test_offline_generation_bench_refuses_an_empty_passage_file(tmp_path: Path) -> None:
    generation = load_bench_script("generation_latency")
    empty = tmp_path / "passages.jsonl"
    empty.write_text("")
    with pytest.raises(CastError, match=r"passages.jsonl holds no passages to answer from"):
        generation.time_offline_generator(tmp_path / "topics.json", empty)


def test_offline_generation_bench_names_missing_passages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generation = load_bench_script("generation_latency")
    missing = tmp_path / "provenance_passages.jsonl"
    monkeypatch.setattr(generation, "DEV_2022_PASSAGES", missing)
    with pytest.raises(SystemExit):
        generation.main(["--offline"])
    assert f"--passages: no such file or folder: {missing}" in capsys.readouterr().err


def test_encoder_bench_backend_specs() -> None:
    encoders = load_bench_script("encoders")
    assert encoders.backend_settings("onnx-int8@1") == {"backend": "onnx", "quantize": "int8", "threads": 1}
    assert encoders.backend_settings("torch-fp16") == {
        "backend": "torch",
        "precision": "float16",
        "threads": None,
    }
    assert encoders.backend_settings("st-bf16@2") == {
        "backend": "torch",
        "precision": "bfloat16",
        "threads": 2,
    }
    assert encoders.backend_settings("onnx") == {"backend": "onnx", "precision": "float32", "threads": None}


def test_minilm_flops_by_hand() -> None:
    encoders = load_bench_script("encoders")
    # one layer of width 2, feed-forward 4: linear 2 x (4 x 2² + 2 x 2 x 4) = 64 a token; attention 2 x 2 x 2 a pair
    assert encoders.minilm_flops(1, layers=1, hidden=2, feed_forward=4) == 64 + 8
    assert encoders.minilm_flops(3, layers=2, hidden=2, feed_forward=4) == 2 * (3 * 64 + 9 * 8)


def test_llm_bench_needs_a_server_or_an_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm = load_bench_script("llm")
    topics = tmp_path / "topics.json"
    topics.write_text("[]")
    with pytest.raises(SystemExit):
        llm.main(["--topics", str(topics), "--passages", str(topics)])
    assert "give --base-url and --model, or --engine SHAPE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        llm.main(["--engine", "tiny", "--topics", str(tmp_path / "none.json"), "--passages", str(topics)])
    assert "--topics: no such file or folder" in capsys.readouterr().err
