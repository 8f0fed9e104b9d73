"""Faults on the fixture index: bad settings found before the run, damaged indexes and caches,
resumed and planted outputs, the explorer under load, bounded per-turn input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_audit import BASELINE, cast  # the baseline stages, and `cast` run in this process
from test_faults import advised_command, one_error_line, write

from cast.core.config import load_config
from cast.errors import ConfigError
from cast.formats.topics import load_topics


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("reranker.depth=-1", "reranker.depth must be at least 0, got -1"),
        ("rewriter.max_terms=-1", "rewriter.max_terms must be at least 0, got -1"),
        ("stemmer=bogus", "stemmer must be one of krovetz, porter, none, got 'bogus'"),
        ("knowledge_base.bogus=1", "knowledge_base collection: unknown setting(s) bogus"),
        ("knowledge_base.name=nonexistent", "unknown knowledge_base 'nonexistent'"),
        ("first_stage.k=2147483648", "first_stage.k must be in [1, 2147483647], got 2147483648"),
        ("device=cuda:x", "unknown device 'cuda:x'"),
    ],
)
def test_every_setting_is_checked_before_the_run(core_index, override, message):
    from cast.core.pipeline import Pipeline
    from cast.explore.engine import Explorer

    config = load_config("offline", [f"index={core_index}", "selector.name=eg", override])
    for start in (Pipeline.from_config, Explorer):  # cast run, answer and demo; cast explore
        with pytest.raises(ConfigError) as caught:
            start(config)
        assert message in str(caught.value)


@pytest.mark.parametrize("device", ["cuda", "cuda:7", "mps"])
def test_a_device_this_machine_lacks_is_one_line_before_the_first_turn(capsys, core_index, tmp_path, device):
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has the device")
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has the device")
    code, _, err = cast(
        capsys, "run", *BASELINE, "--index", core_index, "--set", f"device={device}", "--topics",
        Path(__file__).parent.parent / "fixtures/core/conversations.json", "--output", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and f"device '{device}': this machine has " in one_error_line(err)
    assert not list(tmp_path.iterdir())


def test_a_stemmer_other_than_the_indexs_is_refused(core_index):
    from cast.core.pipeline import Pipeline

    built = json.loads((core_index / "cast-build.json").read_text())
    assert built["stemmer"] == "krovetz"
    config = load_config("offline", [f"index={core_index}", "stemmer=porter"])
    with pytest.raises(
        ConfigError, match=r"stemmer 'porter' does not match the index .* built with 'krovetz'"
    ):
        Pipeline.from_config(config)


# --- 7. a corrupt index -----------------------------------------------------------------------------------------


def damaged_copy(index: Path, into: Path, damage) -> Path:
    import shutil

    copy = into / "damaged"
    shutil.copytree(index, copy)
    damage(copy)
    return copy


def garbage_segments(index: Path) -> None:
    for segments in index.glob("segments_*"):
        segments.write_bytes(b"not a Lucene commit point" * 4)


def truncated_postings(index: Path) -> None:
    for postings in index.glob("*.pos"):
        postings.write_bytes(postings.read_bytes()[:20])


def flipped_bits(index: Path) -> None:
    """The middle third of the terms dictionary inverted: Lucene searches on, and fails on no read error."""
    for terms in index.glob("*.tim"):
        data = bytearray(terms.read_bytes())
        third = len(data) // 3
        data[third : 2 * third] = bytes(b ^ 0xFF for b in data[third : 2 * third])
        terms.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [garbage_segments, truncated_postings, flipped_bits])
def test_a_damaged_index_is_one_line_naming_it_and_the_rebuild(core_index, tmp_path, damage, capsys):
    from cast.errors import IndexUnavailableError
    from cast.infra import jvm
    from cast.infra.resources import Resources
    from cast.rank.first_stage import LMDFirstStage

    index = damaged_copy(core_index, tmp_path, damage)
    with pytest.raises(IndexUnavailableError) as caught:
        jvm.index_reader(str(index))
        LMDFirstStage(Resources({"index": str(index)})).search_batch(["radioactivity", "Glasgow"])
    message = str(caught.value)
    assert "\n" not in message and f"cannot read the index at {index}" in message
    # The advice names the inputs the index was built from, so that it works as given.
    advised = advised_command(message)
    assert advised[:3] == ["index", "build", "--input"] and advised[-3:] == [
        "--index",
        str(index),
        "--overwrite",
    ]
    assert cast(capsys, *advised)[0] == 0
    assert LMDFirstStage(Resources({"index": str(index)})).search("Glasgow")


# --- cast run under faults: one shared uninterrupted run to compare with ------------------------------------------


@pytest.fixture(scope="module")
def reference_run(core_index, tmp_path_factory) -> tuple[list[object], Path]:
    """The arguments of a small run (5 turns on the fixture index) and the prefix of its uninterrupted outputs."""
    from cast.cli import main

    common = [
        "run",
        "--index",
        core_index,
        *BASELINE,
        "--topics",
        Path(__file__).parent.parent / "fixtures/core/conversations.json",
    ]
    prefix = tmp_path_factory.mktemp("reference") / "full"
    assert main([str(a) for a in [*common, "--output", prefix]]) == 0
    return common, prefix


def same_outputs(prefix: Path, reference: Path) -> bool:
    """The same run file, byte for byte, and the same answers records but for their wall-clock timings."""

    def records(path: str) -> list[dict]:
        return [{**json.loads(line), "timings": None} for line in Path(path).read_text().splitlines()]

    same_run = Path(f"{prefix}.run").read_bytes() == Path(f"{reference}.run").read_bytes()
    return same_run and records(f"{prefix}.answers.jsonl") == records(f"{reference}.answers.jsonl")


def test_resume_drops_records_that_two_runs_both_wrote(capsys, reference_run, tmp_path):
    common, reference = reference_run
    answers = Path(f"{reference}.answers.jsonl").read_text().splitlines(keepends=True)
    run_lines = Path(f"{reference}.run").read_text().splitlines(keepends=True)
    prefix = tmp_path / "twice"
    # Two runs that both wrote the first two turns, interleaved.
    first_two = {json.loads(line)["qid"] for line in answers[:2]}
    lines_of_two = [line for line in run_lines if line.split()[0] in first_two]
    Path(f"{prefix}.run.partial").write_text("".join(lines_of_two * 2))
    Path(f"{prefix}.answers.jsonl.partial").write_text(
        "".join([answers[0], answers[0], answers[1], answers[1]])
    )
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert "resuming: 2 turn(s)" in err
    assert same_outputs(prefix, reference)


# --- 5. a planted symlink ---------------------------------------------------------------------------------------


def test_a_planted_symlink_is_never_written_through(capsys, reference_run, tmp_path):
    common, reference = reference_run
    victim = write(tmp_path / "elsewhere" / "precious.txt", "keep me\n")
    out = tmp_path / "out"
    out.mkdir()
    for guessable in (".planted.answers.partial.jsonl", ".planted.partial.run"):  # the old temporary names
        (out / guessable).symlink_to(victim)
    code, _, err = cast(capsys, *common, "--output", out / "planted")
    assert code == 0, err
    assert same_outputs(out / "planted", reference)
    assert victim.read_text() == "keep me\n"

    (out / "linked.answers.jsonl.partial").symlink_to(victim)  # the resumable file's own name
    code, _, err = cast(capsys, *common, "--output", out / "linked")
    assert code == 1
    assert f"{out / 'linked.answers.jsonl.partial'} is a symbolic link" in one_error_line(err)
    assert victim.read_text() == "keep me\n"


# --- 10. explorer starvation ------------------------------------------------------------------------------------


def test_a_burst_of_uncached_turns_leaves_health_and_cached_turns_fast(core_index, tmp_path):
    import threading

    import httpx

    from cast.explore.api import create_app
    from cast.explore.engine import Choice, Explorer, stage_sections
    from cast.explore.server import BackgroundServer

    config = load_config(
        "offline", [f"index={core_index}", f"cache_dir={tmp_path}", *(s for s in BASELINE if s != "--set")]
    )
    conversations = load_topics(Path(__file__).parent.parent / "fixtures/core/conversations.json")
    explorer = Explorer(config, conversations, time_limit=60, max_pending=2)
    entered, release = threading.Event(), threading.Event()
    first_stage = explorer.stage("first_stage", stage_sections(config, Choice())[0]["first_stage"])
    search_batch = first_stage.search_batch

    def held(queries, *args, **kwargs):  # the turn being answered takes as long as the test says
        if "Glasgow" in queries[0]:
            entered.set()
            release.wait(timeout=60)
        return search_batch(queries, *args, **kwargs)

    burst, statuses, refused = 45, [], threading.Semaphore(0)  # the audit's burst
    with (
        BackgroundServer(create_app(explorer)) as server,
        httpx.Client(base_url=server.url, timeout=90) as client,
    ):
        cached = {"conversation_id": "2", "turn": 1, "params": {}}
        assert client.post("api/answer", json=cached).status_code == 200
        first_stage.search_batch = held

        def ask(words: int) -> None:
            body = {"conversation_id": "1", "turn": 1, "params": {"words": words}}
            response = client.post("api/answer", json=body)
            statuses.append((response.status_code, response.headers.get("retry-after")))
            if response.status_code == 503:
                refused.release()

        askers = [threading.Thread(target=ask, args=(20 + n,)) for n in range(burst)]
        for asker in askers:
            asker.start()
        try:
            assert entered.wait(timeout=60)
            for _ in range(burst - 2):  # all but the running and the queued turn are refused at once
                assert refused.acquire(timeout=60)
            # Before the fix, the waiting requests held every pool thread (40) and these waited for them.
            assert client.get("api/health", timeout=10).status_code == 200
            assert client.post("api/answer", json=cached, timeout=10).json()["cached"] is True
        finally:
            release.set()
            for asker in askers:
                asker.join(timeout=90)
            first_stage.search_batch = search_batch
            explorer.close()
    assert sorted(statuses) == [(200, None)] * 2 + [(503, "2")] * (burst - 2)


# --- per-turn input bounds --------------------------------------------------------------------------------------


def test_every_per_turn_input_is_bounded_and_the_turn_says_so(core_index):
    from cast.core.limits import MAX_HISTORY_TURNS, MAX_PASSAGE_CHARS, MAX_RESPONSE_CHARS, MAX_UTTERANCE_CHARS
    from cast.core.pipeline import Pipeline
    from cast.core.records import Passage, PastTurn, ScoredPassage, Turn

    overrides = [f"index={core_index}", *(s for s in BASELINE if s != "--set"), "rewriter.name=raw"]
    pipeline = Pipeline.from_config(load_config("offline", overrides))
    long_response = "Glasgow lies on the River Clyde. " * 1000
    history = [
        PastTurn(Turn(f"u_{n}", "u", str(n), "Tell me about Glasgow.", response=long_response), "Glasgow")
        for n in range(1, 61)
    ]
    huge = "Which river flows through Glasgow? " * 30_000  # about 1 MB
    seen = {}
    search_batch = pipeline.first_stage.search_batch

    def with_a_huge_passage(queries, *args, **kwargs):
        seen["query_chars"] = max(map(len, queries))
        rankings = search_batch(queries, *args, **kwargs)
        giant = ScoredPassage(Passage("giant", "Clyde " * 100_000), score=1.0)
        return [[*ranking, giant] for ranking in rankings]

    pipeline.first_stage.search_batch = with_a_huge_passage
    result = pipeline.answer_turn(history, Turn("u_61", "u", "61", huge))
    record = result.to_record()
    assert seen["query_chars"] <= MAX_UTTERANCE_CHARS
    assert record["input_limits"] == {
        "utterance": len(huge),
        "history_turns": 60,
        "history_texts": MAX_HISTORY_TURNS,
        "passage_texts": 1,
    }
    assert len(record["utterance"]) == MAX_UTTERANCE_CHARS
    assert max(len(p.passage.text) for p in result.ranking) == MAX_PASSAGE_CHARS
    assert len(json.dumps(record)) < 200_000  # 24 MB before
    assert len(long_response) > MAX_RESPONSE_CHARS


# --- scores independent of batch composition --------------------------------------------------------------------


def test_a_turns_reranking_scores_do_not_depend_on_its_batch(core_index, one_torch_thread):
    from cast.core.registry import build_stage
    from cast.infra.resources import Resources
    from cast.rank.first_stage import LMDFirstStage

    resources = Resources({"index": str(core_index)})
    first_stage = LMDFirstStage(resources)
    reranker = build_stage("reranker", {"name": "biencoder", "embeddings": "none"}, resources)
    question = "Which river flows through Glasgow?"
    others = ["What is the history of the Paris Agreement on climate change and who signed it first?", "x"]
    item = (question, first_stage.search(question))
    alone = reranker.rerank_batch([item])[0]
    batched = reranker.rerank_batch(
        [(q, first_stage.search(q)) for q in others[:1]] + [item] + [(others[1], [])]
    )[1]
    assert [(p.id, p.score) for p in alone] == [
        (p.id, p.score) for p in batched
    ]  # exactly, not approximately
