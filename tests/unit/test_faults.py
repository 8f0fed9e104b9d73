"""Faults, hostile input and load (issue 20): each defect the reliability audit found, as a regression test.

Fault injection is real where it can be made so, and bounded in time: processes are killed with signals, a disk is
filled (a small tmpfs where this machine lets us mount one; otherwise RLIMIT_FSIZE makes writes fail with EFBIG,
the same path through the code), caches and indexes are corrupted byte by byte, two runs share one output prefix,
and a symlink is planted at a temporary file's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_audit import BASELINE, cast  # the baseline stages, and `cast` run in this process

from cast.core.config import load_config
from cast.errors import ConfigError, DataFormatError
from cast.formats.topics import load_topics


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- 1. duplicate topic numbers -------------------------------------------------------------------------------


def test_one_qid_for_two_questions_is_an_error_naming_both_places(tmp_path):
    topics = [
        {"number": 1, "turn": [{"number": 1, "raw_utterance": "Who was Marie Curie?"}]},
        {"number": 1, "turn": [{"number": 1, "raw_utterance": "Who was Pierre Curie?"}]},
    ]
    path = write(tmp_path / "topics.json", json.dumps(topics))
    with pytest.raises(
        DataFormatError, match=r"qid 1_1 .*Marie Curie.*topic #1, turn 1.*Pierre Curie.*topic #2"
    ):
        load_topics(path)


def test_a_turn_shared_by_two_paths_is_still_read(tmp_path):
    turn = {"number": "1-1", "utterance": "Who was Marie Curie?"}
    topics = [
        {"number": 132, "turn": [turn, {"number": "1-2", "utterance": "Her prizes?"}]},
        {"number": 132, "turn": [turn, {"number": "1-3", "utterance": "Her children?"}]},
    ]
    conversations = load_topics(write(tmp_path / "topics.json", json.dumps(topics)))
    assert [t.qid for c in conversations for t in c.turns] == ["132_1-1", "132_1-2", "132_1-1", "132_1-3"]


# --- 2. one line, not a traceback, for hostile files ------------------------------------------------------------


def test_deeply_nested_topics_file_is_a_format_error(tmp_path):
    path = write(tmp_path / "topics.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataFormatError, match="nested too deeply"):
        load_topics(path)


def test_deeply_nested_config_is_a_config_error(tmp_path):
    path = write(tmp_path / "deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


def test_non_utf8_config_names_the_file(tmp_path):
    path = write(tmp_path / "latin.yaml", "tag: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.yaml: not UTF-8 text \(byte 0xe9"):
        load_config(path)


def test_non_utf8_run_and_answers_files_name_file_and_line(tmp_path):
    from cast.evaluate.answers import read_answers
    from cast.formats.runfile import read_run

    run = write(tmp_path / "x.run", b"1_1 Q0 d1 1 2.0 t\n1_1 Q0 caf\xe9 2 1.0 t\n")
    with pytest.raises(DataFormatError, match=r"x\.run:2: not UTF-8"):
        read_run(run)
    answers = write(tmp_path / "x.answers.jsonl", b'{"qid": "caf\xe9"}\n')
    with pytest.raises(DataFormatError, match=r"x\.answers\.jsonl:1: not UTF-8"):
        read_answers(answers)


# --- 8. settings accepted silently ------------------------------------------------------------------------------


def test_base_is_read_from_the_referring_configs_folder(tmp_path, monkeypatch):
    write(tmp_path / "configs" / "parent.yaml", "base: offline\nfirst_stage: {name: lmd, mu: 1234}\n")
    child = write(tmp_path / "configs" / "child.yaml", "base: parent.yaml\ntag: child\n")
    monkeypatch.chdir(tmp_path)  # not the configs' folder
    assert load_config(child)["first_stage"]["mu"] == 1234


def test_missing_base_names_the_referring_file(tmp_path):
    child = write(tmp_path / "child.yaml", "base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"child\.yaml: base: no config 'nowhere\.yaml'"):
        load_config(child)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("reranker.depth=-1", "reranker.depth must be at least 0, got -1"),
        ("rewriter.m=-1", "rewriter.m must be at least 0, got -1"),
        ("stemmer=bogus", "stemmer must be one of krovetz, porter, none, got 'bogus'"),
        ("knowledge_base.bogus=1", "knowledge_base collection: unknown setting(s) bogus"),
        ("knowledge_base.name=nonexistent", "unknown knowledge_base 'nonexistent'"),
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


def test_a_stemmer_other_than_the_indexs_is_refused(core_index):
    from cast.core.pipeline import Pipeline

    built = json.loads((core_index / "cast-build.json").read_text())
    assert built["stemmer"] == "krovetz"
    config = load_config("offline", [f"index={core_index}", "stemmer=porter"])
    with pytest.raises(
        ConfigError, match=r"stemmer 'porter' does not match the index .* built with 'krovetz'"
    ):
        Pipeline.from_config(config)


# --- 6. collection ids ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a b", "contents": "x"}', r"c\.jsonl:2: record id 'a b' contains whitespace"),
        ('{"id": true, "contents": "x"}', r"c\.jsonl:2: record has no 'id'"),
    ],
)
def test_passage_ids_are_checked_at_index_time(tmp_path, line, message):
    from cast.index.collections import read_passages

    path = write(tmp_path / "c.jsonl", '{"id": 7, "contents": "seven"}\n' + line + "\n")
    with pytest.raises(DataFormatError, match=message):
        list(read_passages([path], "jsonl"))


def test_an_id_with_whitespace_from_an_older_index_stops_the_run_at_its_first_turn(tmp_path):
    from cast.core.records import Passage, ScoredPassage
    from cast.errors import CastError
    from cast.formats.outputs import RunOutputs

    outputs = RunOutputs(tmp_path / "r", "t")
    with pytest.raises(CastError, match=r"passage id 'a b', which a run file cannot hold"):
        outputs.append("1_1", [ScoredPassage(Passage("a b", "text"), score=1.0)], {"qid": "1_1"})
    assert not outputs.run_partial.exists()


def test_a_numeric_article_id_is_read_as_a_string(tmp_path):
    from cast.index.collections import read_passages

    article = {"id": 12, "contents": [{"type": "sanitized_html", "content": "<p>Hello there.</p>"}]}
    path = write(tmp_path / "wapo.jsonl", json.dumps(article) + "\n")
    assert [p.id for p in read_passages([path], "wapo")] == ["WAPO_12-1"]


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


@pytest.mark.parametrize("damage", [garbage_segments, truncated_postings])
def test_a_damaged_index_is_one_line_naming_it_and_the_rebuild(core_index, tmp_path, damage, capsys):
    from cast.core.resources import Resources
    from cast.errors import IndexUnavailableError
    from cast.infra import jvm
    from cast.rank.first_stage import LMDFirstStage

    index = damaged_copy(core_index, tmp_path, damage)
    with pytest.raises(IndexUnavailableError) as caught:
        jvm.index_reader(str(index))
        LMDFirstStage(Resources({"index": str(index)})).search("radioactivity")
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


def advised_command(message: str) -> list[str]:
    """The arguments of the `cast ...` command an error message advises (between backquotes)."""
    import shlex

    command = shlex.split(message.split("`")[-2])
    assert command[0] == "cast"
    return command[1:]


@pytest.mark.parametrize("damaged", ["embeddings.npy", "id_rows.npy"])
def test_a_damaged_embedding_store_is_one_line_naming_it_and_the_rebuild(tmp_path, damaged):
    from test_index_audit import SETTINGS, passage, toy_embed, write_jsonl

    from cast.errors import CastError
    from cast.index.embeddings import PassageEmbeddings, build_embeddings

    collection = write_jsonl(tmp_path / "c.jsonl", [passage(f"p{n}") for n in range(50)])
    store = tmp_path / "ix.embeddings"
    build_embeddings(collection, store, SETTINGS, toy_embed, 4, index_documents=50, progress=False)
    truncate(store / damaged)
    rebuild = rf"`cast index embed --input FILES\.\.\. --index {tmp_path / 'ix'} --overwrite`"
    with pytest.raises(CastError, match=rf"store {store} is damaged .*{rebuild}"):
        PassageEmbeddings.open(store)


# --- 11. cache faults -------------------------------------------------------------------------------------------


def filled_cache(path: Path, entries: int = 2000) -> None:
    from cast.infra.cache import Cache

    cache = Cache(path)
    cache.put_many("square", [({"x": i}, {"value": i * i, "padding": "p" * 100}) for i in range(entries)])
    cache.close()
    for suffix in ("-wal", "-shm"):
        assert not path.with_name(path.name + suffix).exists()  # checkpointed on close: the bytes are in path


def corrupt_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8192] = b"\xff" * 8192
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def text_file(path: Path) -> None:
    path.write_text("these are notes, not a database\n" * 10)


def wrong_schema(path: Path) -> None:
    import sqlite3

    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE entries (k TEXT, v TEXT)")


@pytest.mark.parametrize("damage", [corrupt_middle, truncate, text_file, wrong_schema])
def test_a_damaged_cache_is_moved_aside_and_rebuilt(tmp_path, caplog, damage):
    from cast.infra.cache import Cache

    path = tmp_path / "cache.sqlite"
    filled_cache(path)
    damage(path)
    cache = Cache(path)
    inputs = [{"x": i} for i in range(2000)]
    values = cache.get_or_compute_many(
        "square", inputs, lambda missing: [{"value": x["x"] ** 2} for x in missing]
    )
    assert [v["value"] for v in values] == [i * i for i in range(2000)]
    assert path.with_name("cache.sqlite.damaged").exists()
    assert f"the cache {path} was damaged" in caplog.text
    cache.close()
    assert Cache(path).get("square", {"x": 7}) == {"value": 49}  # computed after the rebuild, and kept


def test_a_value_that_is_not_json_is_recomputed(tmp_path, caplog):
    import sqlite3

    from cast.infra.cache import Cache, cache_key

    path = tmp_path / "cache.sqlite"
    filled_cache(path, entries=1)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET value = '{not json' WHERE key = ?", [cache_key({"x": 0})])
    assert Cache(path).get_or_compute("square", {"x": 0}, lambda: {"value": 0}) == {"value": 0}
    assert "holds values that are not JSON" in caplog.text


def test_a_folder_at_the_cache_path_is_one_error_naming_it(tmp_path):
    from cast.errors import CastError
    from cast.infra.cache import Cache

    (tmp_path / "cache.sqlite").mkdir()
    with pytest.raises(CastError, match=r"the cache .*cache\.sqlite is a folder, not a file"):
        Cache(tmp_path / "cache.sqlite")


def test_a_write_lock_held_elsewhere_does_not_lose_the_computed_value(tmp_path, caplog):
    import sqlite3

    from cast.infra.cache import Cache

    path = tmp_path / "cache.sqlite"
    cache = Cache(path, busy_timeout=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    try:
        assert cache.get_or_compute("square", {"x": 3}, lambda: 9) == 9
        assert "could not store 1 square entries" in caplog.text and "database is locked" in caplog.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert cache.get_or_compute("square", {"x": 3}, lambda: 9) == 9
    assert cache.get("square", {"x": 3}) == 9  # stored once the lock is free


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


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("turns:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- 4. two runs on one output prefix ---------------------------------------------------------------------------


def test_a_second_run_on_a_prefix_is_refused_and_a_killed_holders_lock_is_free(
    capsys, reference_run, tmp_path
):
    import signal
    import subprocess
    import sys

    common, reference = reference_run
    prefix = tmp_path / "shared"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(prefix)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"  # it holds the lock now (no sleep: it says so)
        code, _, err = cast(capsys, *common, "--output", prefix)
        assert code == 1
        assert f"another cast run (PID {holder.pid}) is writing {prefix}.run" in one_error_line(err)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        holder.kill()
    assert Path(f"{prefix}.lock").exists()  # left by the killed run, but no process holds it
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert same_outputs(prefix, reference) and not Path(f"{prefix}.lock").exists()


HOLD_LOCK = """
import sys
from cast.formats.outputs import RunOutputs
with RunOutputs(sys.argv[1], "held").locked():
    print("locked", flush=True)
    sys.stdin.read()
"""


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


# --- 3. a full disk, and a kill in the middle of a record -----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 16 KiB tmpfs (4 pages: the lock, the run lines and about two answers records fit), and a
    function that grows it to 1 MiB; None where tmpfs cannot be mounted here (not root, or no mount namespace)."""
    import shutil
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mount = shutil.which("mount")
    mounted = mount is not None and (
        subprocess.run(
            [mount, "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        yield None
        return

    def grow() -> None:
        subprocess.run([mount, "-o", "remount,size=1m", str(disk)], check=True, capture_output=True)

    try:
        yield disk, grow
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def run_with_file_size_limit(argv: list[object], limit: int) -> tuple[int, str]:
    """``cast`` in a subprocess whose files may not grow beyond ``limit`` bytes (writes fail with EFBIG, as they
    fail with ENOSPC on a full disk; Python ignores the SIGXFSZ that would otherwise end the process)."""
    import resource
    import subprocess
    import sys

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "cast.cli", *map(str, argv)],
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr


def test_a_full_disk_is_one_line_keeping_the_completed_turns_and_a_rerun_resumes(
    capsys, reference_run, tmp_path, small_disk
):
    common, reference = reference_run
    if small_disk is not None:  # a real full disk (ENOSPC)
        disk, grow = small_disk
        prefix = disk / "r"
        code, _, err = cast(capsys, *common, "--output", prefix)
    else:  # no tmpfs here: a file-size limit (EFBIG) takes the same path through the code
        prefix = tmp_path / "r"
        code, err = run_with_file_size_limit([*common, "--output", prefix], limit=8000)
    assert code == 1
    line = one_error_line(err)
    assert (
        line.startswith("cast run: error: cannot write turn ")
        and f"to {prefix}.answers.jsonl.partial: " in line
    )
    kept = int(line.partition("completed before it are kept")[0].rpartition("the ")[2].split()[0])
    assert 1 <= kept < 5, line
    assert line.endswith("and running the same command again resumes from them")
    assert not Path(f"{prefix}.answers.jsonl").exists()

    if small_disk is not None:
        grow()
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert f"resuming: {kept} turn(s)" in err
    assert same_outputs(prefix, reference)


KILLED_MID_RECORD = """
import os, signal, sys
import cast.formats.outputs
from cast.cli import main

write = cast.formats.outputs.append_durably
records = 0

def dying(path, text):
    global records
    if str(path).endswith(".answers.jsonl.partial"):
        records += 1
        if records == 3:  # half of the third record reaches the disk, then kill -9
            write(path, text[: len(text) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    write(path, text)

cast.formats.outputs.append_durably = dying
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a second process starts its own JVM: about 20 s
def test_kill_9_in_the_middle_of_a_record_then_the_same_command_resumes(capsys, reference_run, tmp_path):
    import signal
    import subprocess
    import sys

    common, reference = reference_run
    prefix = tmp_path / "killed"
    argv = [sys.executable, "-c", KILLED_MID_RECORD, *map(str, common), "--output", str(prefix)]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not Path(f"{prefix}.answers.jsonl").exists()
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert "resuming: 2 turn(s)" in err
    assert same_outputs(prefix, reference)


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
    from cast.core.resources import Resources
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


def test_a_full_disk_outside_cast_run_is_one_line_too(capsys, monkeypatch):
    import errno

    from cast.commands import run as run_command

    def full(args):
        raise OSError(
            errno.ENOSPC, "No space left on device"
        )  # as a write() on a full disk raises it: no file

    monkeypatch.setattr(run_command, "main", full)
    code, _, err = cast(capsys, "run", "--topics", "t.json", "--output", "o")
    assert code == 1
    assert one_error_line(err) == (
        "cast run: error: No space left on device (free some space, then run the same command again)"
    )
