"""The LLM client and `cast run --config llm` against a real engine: transformers' own OpenAI-compatible server
(`transformers serve`) started here on a tiny random-weight Llama-shaped model the test writes. The protocol
subset, token counts and the cache are checked against what an engine really answers, beside the scripted server
of tests/chat_server.py that plays the failures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tiny_models
from fast_pipeline import cli_sets
from test_llm_pipeline import QUICK, llm_sets, read_records

from cast.cli import main
from cast.infra.llm import ChatClient, ChatServer
from cast.testing import ServedModel


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Iterator[tuple[ServedModel, str]]:
    model = tiny_models.chat_model(tmp_path_factory.mktemp("chat-model"))
    running = ServedModel(model, tmp_path_factory.mktemp("hf-home"))
    try:
        running.wait()
        yield running, str(model)
    finally:
        running.stop()


def test_the_client_gets_an_engines_completion_and_its_token_counts(engine):
    running, model = engine
    client = ChatClient(ChatServer(running.url, retries=0), None)
    messages = [{"role": "user", "content": "what causes throat cancer ?"}]
    reply = client.complete(model, messages, temperature=0.0, seed=0, max_tokens=6)
    assert isinstance(reply.text, str)
    assert reply.prompt_tokens > 0 and 0 < reply.completion_tokens <= 6
    assert reply.finish_reason in ("stop", "length")
    # temperature 0: the same request gets the same words
    assert client.complete(model, messages, temperature=0.0, seed=0, max_tokens=6).text == reply.text


def run_records(argv: list, output: Path, capsys) -> list[dict]:
    assert main([str(a) for a in [*argv, "--output", output]]) == 0, capsys.readouterr().err
    return read_records(output.with_name(output.name + ".answers.jsonl"))


def test_runs_through_the_engine_record_tokens_and_rerun_from_the_cache(
    capsys, tmp_path, fixtures, core_index, engine
):
    running, model = engine
    topics = fixtures / "core" / "conversations.json"
    argv = ["run", "--config", "llm", "--index", core_index, "--topics", topics]
    cache = tmp_path / "cache"

    def rewrites(url: str) -> list:
        return [*argv, *llm_sets(url, cache, model, model), "--set", "rewriter.max_tokens=8"]

    def answers(url: str) -> list:
        # The random model's rewrites retrieve nothing here: the answers are asked after the manual rewrites.
        return [*argv, *cli_sets(*QUICK, f"cache_dir={cache}", "rewriter.name=manual", f"summarizer.base_url={url}",
                                 f"summarizer.model={model}", "summarizer.retries=0", "summarizer.words=12")]  # fmt: skip

    rewritten = run_records(rewrites(running.url), tmp_path / "rewrites", capsys)
    answered = run_records(answers(running.url), tmp_path / "answers", capsys)
    assert len(rewritten) == len(answered) == 5
    for record in rewritten:
        assert record["rewrite"]["inputs"]["usage"]["prompt_tokens"] > 0
        assert record["query"].strip()  # the engine's words, or the utterance where it gave none
    for record in answered:
        assert record["answer"]["settings"]["usage"]["completion_tokens"] > 0
        assert record["answer"]["generator"] == f"llm:{model}"

    # Nothing is asked again: the reruns reach no server at all (the cache's key holds no address).
    nowhere = "http://127.0.0.1:9/v1"
    rewritten_again = run_records(rewrites(nowhere), tmp_path / "rewrites-again", capsys)
    answered_again = run_records(answers(nowhere), tmp_path / "answers-again", capsys)
    assert [r["query"] for r in rewritten_again] == [r["query"] for r in rewritten]
    assert [r["answer"] for r in answered_again] == [
        {**r["answer"], "settings": {**r["answer"]["settings"], "base_url": nowhere}} for r in answered
    ]
