"""`cast run` with the LLM rewriter, the LLM summarizer and the claims verifier against a chat server process, on
the fixture collections: answers records, the cache on rerun, an unreachable server, iKAT runs that validate."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chat_server import RunningServer
from fast_pipeline import cli_sets
from test_ikat_pipeline import ikat_index  # noqa: F401  (the fixture the iKAT tests here read, as `collection`)

from cast.cli import main

QUICK = ("reranker.name=none", "linker.name=none", "selector.name=o")


@pytest.fixture
def collection(request):
    """The iKAT tests' seven-passage index."""
    return request.getfixturevalue("ikat_index")


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    running = RunningServer()
    yield running
    running.stop()


def llm_sets(
    url: str, cache_dir, rewriter_model: str = "last-line", summarizer_model: str = "invent"
) -> list[str]:
    return cli_sets(
        *QUICK,
        f"cache_dir={cache_dir}",
        f"rewriter.base_url={url}",
        f"rewriter.model={rewriter_model}",
        f"summarizer.base_url={url}",
        f"summarizer.model={summarizer_model}",
        "rewriter.retries=0",
        "summarizer.retries=0",
    )


def read_records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_records_token_counts_and_each_claims_support_and_a_rerun_asks_nothing(
    capsys, tmp_path, fixtures, core_index, server
):
    server.clear()
    topics = fixtures / "core" / "conversations.json"
    argv = ["run", "--config", "llm", "--index", core_index, "--topics", topics]
    sets = llm_sets(server.url, tmp_path / "cache")
    assert main([str(a) for a in [*argv, *sets, "--output", tmp_path / "first"]]) == 0, (
        capsys.readouterr().err
    )
    records = read_records(tmp_path / "first.answers.jsonl")
    assert len(records) == 5 and len(server.log()) == 10  # one rewrite and one answer a turn
    for record in records:
        assert record["query"] == record["utterance"]  # the last-line model repeats the question line
        assert record["rewrite"]["inputs"]["usage"]["prompt_tokens"] > 0
        assert record["answer"]["settings"]["usage"]["completion_tokens"] > 0
        verification = record["verification"]
        claims = verification["claims"]
        assert claims[0]["text"].startswith("The passages say the moon") and not claims[0]["supported"]
        kept = [c["text"] for c in claims if c["kept"]]
        assert record["answer"]["text"] == " ".join(kept) or verification["abstained"]
        assert record["config"]["verifier"]["name"] == "claims"

    server.clear()
    assert main([str(a) for a in [*argv, *sets, "--output", tmp_path / "again"]]) == 0
    assert server.log() == []  # every answer came from the cache
    again = read_records(tmp_path / "again.answers.jsonl")
    assert [r["answer"] for r in again] == [r["answer"] for r in records]
    assert [r["verification"] for r in again] == [r["verification"] for r in records]


def test_an_unreachable_server_stops_the_run_with_one_line_and_no_complete_output(
    capsys, tmp_path, fixtures, core_index
):
    topics = fixtures / "core" / "conversations.json"
    sets = llm_sets("http://127.0.0.1:9/v1", tmp_path / "cache")
    argv = ["run", "--config", "llm", "--index", core_index, "--topics", topics, *sets]
    code = main([str(a) for a in [*argv, "--output", tmp_path / "x"]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert (
        "http://127.0.0.1:9/v1" in err[-1]
        and "unreachable" in err[-1]
        and "start the model server" in err[-1]
    )
    assert not (tmp_path / "x.answers.jsonl").exists() and not (tmp_path / "x.run").exists()


@pytest.mark.parametrize("fmt", ["ikat2024", "ikat2025"])
def test_ikat_runs_with_the_llm_stages_validate(capsys, tmp_path, fixtures, collection, server, fmt):
    topics = fixtures / "ikat" / "2023_test_topics.json"  # the conversations the fixture passages are about
    # Every statement appended to the query: each turn finds some of the seven fixture passages.
    sets = llm_sets(server.url, tmp_path / "cache", summarizer_model="cite")
    sets += cli_sets("ptkb.name=all", "ptkb.rewrite=append")
    argv = ["run", "--config", "ikat-llm", "--index", collection, "--topics", topics, *sets]
    code = main([str(a) for a in [*argv, "--format", fmt, "--output", tmp_path / "x"]])
    assert code == 0, capsys.readouterr().err
    suffix = "jsonl" if fmt == "ikat2025" else "json"
    assert (
        main(["validate", "--format", fmt, str(tmp_path / f"x.{fmt}.{suffix}"), "--topics", str(topics)]) == 0
    )


def test_the_llm_rewriter_reads_the_statements_the_ptkb_stage_gives_it(
    capsys, tmp_path, fixtures, collection, server
):
    server.clear()
    topics = fixtures / "ikat" / "2023_test_topics.json"
    sets = llm_sets(server.url, tmp_path / "cache", summarizer_model="cite")
    sets += cli_sets("ptkb.name=all", "ptkb.rewrite=context")  # a new name starts its section afresh
    argv = ["run", "--config", "ikat-llm", "--index", collection, "--topics", topics, *sets]
    assert main([str(a) for a in [*argv, "--output", tmp_path / "x"]]) == 0, capsys.readouterr().err
    rewrites = [
        r["body"]["messages"][-1]["content"] for r in server.log() if r["body"]["model"] == "last-line"
    ]
    assert len(rewrites) == 6
    assert all(r.startswith("About the user: ") for r in rewrites)  # in lock-step order, not by conversation
    records = read_records(tmp_path / "x.answers.jsonl")
    # The statements are not appended.
    assert [r["query"] for r in records] == [r["utterance"] for r in records]
