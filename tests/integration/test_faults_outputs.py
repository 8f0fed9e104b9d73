"""Outputs under faults: an output made from some inputs is never continued, finished or kept with others (the
index, the topics, the settings), no write follows a planted link or leaves a half file, advice in an error works
as given, and odd but valid data (damaged caches and records, iKAT ids, shards that overlap) is one clear line.

Two real indexes of different collections are built; interruptions are left as a killed run leaves them (its
``.partial`` files, a hidden temporary file); disks are filled with a file-size limit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_cli_audit import BASELINE, cast, one_error_line
from test_faults import advised_command
from test_faults_outputs_refusals import CONVERSATIONS, FIXTURES

from cast.errors import CastError, DataFormatError
from cast.formats.textfiles import json_lines
from cast.formats.topics import load_topics


@pytest.fixture(scope="module")
def other_index(tmp_path_factory) -> Path:
    """An index of another collection: four of the six fixture passages."""
    from cast.index.build import build_index

    folder = tmp_path_factory.mktemp("other")
    lines = (FIXTURES / "core" / "corpus.jsonl").read_text().splitlines(keepends=True)[:4]
    (folder / "corpus.jsonl").write_text("".join(lines))
    return build_index([folder / "corpus.jsonl"], folder / "index", threads=1).path


def interrupt(prefix: Path, keep: int) -> None:
    """Leave ``prefix``'s outputs as a run killed after ``keep`` turns leaves them."""
    records = Path(f"{prefix}.answers.jsonl").read_text().splitlines(keepends=True)[:keep]
    qids = {json.loads(record)["qid"] for record in records}
    lines = [
        line
        for line in Path(f"{prefix}.run").read_text().splitlines(keepends=True)
        if line.split()[0] in qids
    ]
    Path(f"{prefix}.answers.jsonl.partial").write_text("".join(records))
    Path(f"{prefix}.run.partial").write_text("".join(lines))
    Path(f"{prefix}.answers.jsonl").unlink()
    Path(f"{prefix}.run").unlink()


def other_topics(tmp_path: Path) -> Path:
    """The fixture conversations with the qids reused for other questions."""
    data = json.loads(CONVERSATIONS.read_text())
    data[0]["turns"][0] = {
        "utterance": "Tell me about Edinburgh.",
        "manual_rewrite": "Tell me about Edinburgh.",
    }
    path = tmp_path / "other-topics.json"
    path.write_text(json.dumps(data))
    return path


# --- silent mixing: a complete-looking output of other inputs ------------------------------------------------------


def test_a_run_interrupted_on_one_index_is_not_resumed_on_another(capsys, core_index, other_index, tmp_path):
    prefix = tmp_path / "r"
    common = ["run", *BASELINE, "--topics", CONVERSATIONS, "--output", prefix]
    assert cast(capsys, *common, "--index", core_index)[0] == 0
    records = Path(f"{prefix}.answers.jsonl").read_text().splitlines()
    assert json.loads(records[0])["config"]["index"].startswith("6 passages, ")
    interrupt(prefix, keep=2)
    code, _, err = cast(capsys, *common, "--index", other_index)
    assert code == 1
    assert "with other settings (index: '6 passages, " in one_error_line(err) and "-> '4 passages, " in err
    assert not Path(f"{prefix}.run").exists()
    code, _, err = cast(capsys, *common, "--index", core_index)  # the same index: it resumes
    assert code == 0 and "resuming: 2 turn(s)" in err


def test_a_run_interrupted_on_some_topics_is_not_resumed_on_others_that_reuse_the_qids(
    capsys, core_index, tmp_path
):
    data = json.loads(CONVERSATIONS.read_text())
    data[1]["turns"][1]["manual_rewrite"] = (
        "Which protocol is about climate change?"  # a turn not yet answered
    )
    changed = tmp_path / "topics.json"
    changed.write_text(json.dumps(data))
    prefix = tmp_path / "r"
    common = ["run", *BASELINE, "--index", core_index, "--output", prefix]
    assert cast(capsys, *common, "--topics", CONVERSATIONS)[0] == 0
    interrupt(prefix, keep=2)
    code, _, err = cast(capsys, *common, "--topics", changed)
    assert code == 1 and "with other settings (topics: 'sha256:" in one_error_line(err)


def test_turns_prepared_on_one_index_are_not_finished_on_another(capsys, core_index, other_index, tmp_path):
    prepared = tmp_path / "p.jsonl.gz"
    common = ["run", *BASELINE, "--topics", CONVERSATIONS]
    assert (
        cast(capsys, *common, "--index", core_index, "--stop-after", "rerank", "--prepared", prepared)[0] == 0
    )
    code, _, err = cast(
        capsys, *common, "--index", other_index, "--prepared", prepared, "--output", tmp_path / "r"
    )
    line = one_error_line(err)
    assert code == 1 and 'the prepared turns were made with another index ("6 passages, ' in line
    assert not list(tmp_path.glob("r.*"))


def test_turns_prepared_from_some_topics_are_not_finished_for_others(capsys, core_index, tmp_path):
    prepared = tmp_path / "p.jsonl.gz"
    common = ["run", *BASELINE, "--index", core_index]
    assert (
        cast(capsys, *common, "--topics", CONVERSATIONS, "--stop-after", "rerank", "--prepared", prepared)[0]
        == 0
    )
    code, _, err = cast(
        capsys,
        *common,
        "--topics",
        other_topics(tmp_path),
        "--prepared",
        prepared,
        "--output",
        tmp_path / "r",
    )
    line = one_error_line(err)
    assert (
        code == 1
        and "turn 1_1 was prepared from other topics (its utterance: 'Tell me about Glasgow.'" in line
    )


@pytest.fixture
def sweep(core_index, tmp_path, capsys):
    """``cast sweep`` of the fast pipeline into ``tmp_path/sweep``: ``sweep(*args)`` gives (exit code, stderr)."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1_3 0 p2 3\n1_2 0 p4 2\n2_1 0 p5 2\n")

    def run(*args: object, topics: Path = CONVERSATIONS) -> tuple[int, str]:
        code, _, err = cast(
            capsys, "sweep", "--index", core_index, *BASELINE, "--topics", topics, "--qrels", qrels,
            "--output", tmp_path / "sweep", *args,
        )  # fmt: skip
        return code, err

    return run


def test_a_sweep_folder_of_other_topics_or_colliding_point_names_is_refused(sweep, tmp_path):
    code, err = sweep("--grid", "selector.threshold=0,1")
    assert code == 0, err
    code, err = sweep("--grid", "selector.threshold=0,1", topics=other_topics(tmp_path))
    assert code == 1 and "holds a sweep of other inputs (topics: 'sha256:" in one_error_line(err)
    # Another key whose last part names the points alike: its points are not the ones in the folder.
    code, err = sweep("--grid", "ptkb.threshold=0,1")
    line = one_error_line(err)
    assert (
        code == 1 and "holds a point threshold=0 made with selector.threshold=0, not ptkb.threshold=0" in line
    )
    code, err = sweep("--grid", "selector.threshold=0,1")
    assert code == 0 and err.count("(finished earlier)") == 2


def test_a_sweep_with_another_grid_does_not_replace_the_folders_report(sweep, tmp_path):
    out = tmp_path / "sweep"
    code, err = sweep("--grid", "selector.threshold=0,1")
    assert code == 0, err
    report = (
        (out / "report.md").read_bytes(),
        (out / "retrieval.csv").read_bytes(),
        (out / "sweep.png").read_bytes(),
    )
    code, err = sweep("--grid", "summarizer.words=30,50")
    line = one_error_line(err)
    assert (
        code == 1
        and f"{out} holds the report of another sweep, with point(s) threshold=0, threshold=1" in line
    )
    assert (
        (out / "report.md").read_bytes(),
        (out / "retrieval.csv").read_bytes(),
        (out / "sweep.png").read_bytes(),
    ) == report
    assert not (out / "words=30.run").exists()
    # The same grid with more values reports every point the folder's report had, and more.
    code, err = sweep("--grid", "selector.threshold=0,1,0.5")
    assert code == 0 and err.count("(finished earlier)") == 2
    assert "threshold=0.5" in (out / "report.md").read_text()
    code, err = sweep("--grid", "summarizer.words=30,50", "--overwrite")
    assert code == 0 and "threshold" not in (out / "report.md").read_text()


def test_a_sweep_removes_the_temporary_files_a_killed_sweep_left(sweep, tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    left = [out / ".threshold=0.answers.0a1b2c3d.partial.jsonl", out / ".prepared.jsonl.5e6f7a8b.partial.gz"]
    for path in left:
        path.write_text("half a file")
    code, err = sweep("--grid", "selector.threshold=0,1")
    assert code == 0, err
    assert not any(path.exists() for path in left) and not list(out.glob(".*"))


# --- writes: links, full disks, folders ---------------------------------------------------------------------------


def test_a_link_at_the_prepared_files_old_temporary_name_is_not_written_through(capsys, core_index, tmp_path):
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    prepared = tmp_path / "p.jsonl.gz"
    Path(f"{prepared}.partial").symlink_to(victim)
    code, _, err = cast(
        capsys, "run", *BASELINE, "--index", core_index, "--topics", CONVERSATIONS, "--stop-after", "rerank",
        "--prepared", prepared,
    )  # fmt: skip
    assert code == 0, err
    assert victim.read_text() == "keep me\n" and prepared.is_file()


def raw_run(capsys, index: Path, tmp_path: Path, *utterances: str, args: tuple = ()) -> tuple[int, str, str]:
    """``cast run`` of the raw utterances given, as one conversation ``z``, into ``tmp_path/r``."""
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topic_id": "z", "turns": [{"utterance": u} for u in utterances]}))
    return cast(
        capsys, "run", *BASELINE, "--set", "rewriter.name=raw", "--index", index, "--topics", topics,
        "--output", tmp_path / "r", *args,
    )  # fmt: skip


def test_a_turn_that_retrieves_nothing_is_named_and_the_run_finished(capsys, core_index, tmp_path):
    code, out, err = raw_run(
        capsys, core_index, tmp_path, "Tell me about Glasgow.", "the of and", "Xyzzy plugh?"
    )
    assert code == 0, err
    assert "note: 2 turn(s) retrieved nothing (e.g. z_2)" in err.strip().split("\n")[-1]
    assert {line.split()[0] for line in (tmp_path / "r.run").read_text().split("\n") if line} == {"z_1"}
    records = {r["qid"]: r for _, r in json_lines(tmp_path / "r.answers.jsonl")}
    assert records["z_2"]["top_ids"] == [] and records["z_2"]["answer"]["no_answer_reason"]
    assert "wrote" in out


def test_a_run_in_which_no_turn_retrieves_anything_is_one_line_and_not_written(capsys, core_index, tmp_path):
    code, _, err = raw_run(capsys, core_index, tmp_path, "the of and", "Xyzzy plugh?")
    assert code == 1 and "Traceback" not in err
    assert "no turn retrieved a passage (turn z_1's query was 'the of and')" in err.strip().split("\n")[-1]
    assert not (tmp_path / "r.run").exists() and not (tmp_path / "r.answers.jsonl").exists()


def test_a_finished_run_whose_records_hold_line_separators_is_written_and_valid(capsys, core_index, tmp_path):
    utterance = "What is Glasgow\u2028on, the river\u0085Clyde?"
    code, _, err = raw_run(capsys, core_index, tmp_path, utterance, args=("--format", "trec-rag24"))
    assert code == 0, err
    [(_, record)] = list(json_lines(tmp_path / "r.answers.jsonl"))
    assert record["utterance"] == utterance
    code, out, err = cast(
        capsys, "validate", "--format", "trec-rag24", "--any-ids", tmp_path / "r.trec-rag24.jsonl"
    )
    assert code == 0, out + err


# --- damaged data of shapes not met before ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "wrong"), [([1, 2], "all"), ({"documents": 6, "stemmer": "krovetz"}, "inputs"), ({"documents": "6", "inputs": []}, "documents")]
)  # fmt: skip
def test_a_damaged_build_record_is_one_line_with_the_rebuild(core_index, tmp_path, record, wrong):
    from cast.infra.resources import Resources

    index = Path(shutil.copytree(core_index, tmp_path / "index"))
    (index / "cast-build.json").write_text(json.dumps(record))
    with pytest.raises(DataFormatError, match=rf"not a build record \(wrong or missing: {wrong}\); rebuild the index with `cast index build --input"):  # fmt: skip
        Resources({"index": str(index)}).stemmer  # noqa: B018


def test_a_cache_entry_of_the_wrong_shape_is_recomputed_with_one_warning(tmp_path, caplog, one_torch_thread):
    import sqlite3

    from cast.core.config import load_config
    from cast.infra.resources import Resources

    config = load_config(
        "offline", [f"cache_dir={tmp_path}", "encoder.backend=torch", "encoder.quantize=none", "device=cpu"]
    )
    resources = Resources(config)
    encoder = resources.sentence_encoder(None, 256)
    texts = [f"Marie Curie discovered element {n}." for n in range(3)]
    expected = encoder.cached_embeddings(texts, resources.cache)
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:  # every entry damaged: a list of the wrong kind
        db.execute("UPDATE entries SET value = '[1, 2, \"a\"]'")
        db.executemany(
            "INSERT INTO entries VALUES ('biencoder-embedding', ?, 'not json')",
            [(str(n),) for n in range(300)],
        )
    fresh = Resources(config)
    assert (fresh.sentence_encoder(None, 256).cached_embeddings(texts, fresh.cache) == expected).all()
    warnings = [
        r for r in caplog.records if "holds values that are not JSON or of another shape" in r.message
    ]
    assert len(warnings) == 1
    fresh.cache.get_many("biencoder-embedding", [str(n) for n in range(300)])
    assert len([r for r in caplog.records if "another shape" in r.message]) == 1


def test_shards_that_share_a_passage_id_are_not_merged(tmp_path):
    from cast.index.build import build_index, merge_indexes

    shards = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        shutil.copy(FIXTURES / "core" / "corpus.jsonl", tmp_path / name / "corpus.jsonl")  # the same ids
        shards.append(
            build_index([tmp_path / name / "corpus.jsonl"], tmp_path / name / "index", threads=1).path
        )
    with pytest.raises(CastError, match=r"passage id 'p1' is in more than one shard"):
        merge_indexes(shards, tmp_path / "merged")
    assert not (tmp_path / "merged").exists() and not list(tmp_path.glob(".merged*"))


# --- the explorer -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(core_index, tmp_path_factory):
    from fastapi.testclient import TestClient
    from test_explore import explorer_config

    from cast.explore.api import create_app
    from cast.explore.engine import Explorer

    explorer = Explorer(
        explorer_config(core_index, tmp_path_factory.mktemp("cache")),
        load_topics(CONVERSATIONS),
        time_limit=60,
    )
    with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
        yield client
    explorer.close()


def test_a_chunked_body_over_the_limit_gets_413(client):
    def chunks():
        for _ in range(160):  # 10 MiB, no Content-Length
            yield b" " * 65_536

    response = client.post(
        "/api/conversations", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413 and "larger than the limit" in response.json()["error"]
    assert client.post("/api/conversations", json={"title": "Glasgow"}).status_code == 201


def test_a_request_from_a_page_of_another_origin_is_refused(client):
    body = {"title": "Glasgow"}
    refused = client.post("/api/conversations", json=body, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and "another origin" in refused.json()["error"]
    assert client.post("/api/conversations", json=body, headers={"Origin": "null"}).status_code == 403
    # An origin is a scheme, a host and a port: the client's server is http://127.0.0.1 (port 80).
    for other in ("http://127.0.0.1:8000", "https://127.0.0.1", "http://localhost", "http://127.0.0.1:x"):
        assert client.post("/api/conversations", json=body, headers={"Origin": other}).status_code == 403
    same_origin = client.post("/api/conversations", json=body, headers={"Origin": "http://127.0.0.1"})
    assert same_origin.status_code == 201
    assert client.get("/api/health", headers={"Origin": "https://evil.example"}).status_code == 200


def test_a_setting_that_is_not_finite_is_refused_by_the_explorer(client):
    response = client.post(
        "/api/answer", content=b'{"conversation_id": "1", "turn": 1, "params": {"gamma": NaN}}',
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code in (400, 422) and "gamma" in response.json()["error"]


@pytest.mark.parametrize(
    "damage",
    [
        '{"format": 1, "surf',
        '{"format": 1, "surfaces": {"a": [[0, "x"]]}, "titles": [], "passages": 1}',
        "[]",
    ],
)
def test_a_damaged_entity_dictionary_is_one_line_whose_advice_rebuilds_it(capsys, tmp_path, damage):
    from cast.entity.builders.collection_entities import EntityDictionary, entities_dir

    collection = FIXTURES / "entity" / "collection.jsonl"
    index = tmp_path / "index"
    assert cast(capsys, "index", "build", "--input", str(collection), "--index", str(index))[0] == 0
    folder = entities_dir(index)
    assert (
        cast(capsys, *advised_command(f"`cast entity dictionary --index {index} --input {collection}`"))[0]
        == 0
    )
    (folder / "dictionary.json").write_text(damage)
    with pytest.raises(DataFormatError) as caught:
        EntityDictionary.load(folder)
    assert "\n" not in str(caught.value) and str(folder / "dictionary.json") in str(caught.value)
    code, out, _ = cast(capsys, *advised_command(str(caught.value)))
    assert code == 0 and "entity resources written" in out
    assert EntityDictionary.load(folder).passages > 0


@pytest.fixture(scope="module")
def served(core_index, tmp_path_factory):
    """The explorer served on a socket, with request heads and bodies given 0.5 s."""
    from test_explore import explorer_config

    from cast.explore.api import create_app
    from cast.explore.engine import Explorer
    from cast.explore.server import BackgroundServer

    explorer = Explorer(
        explorer_config(core_index, tmp_path_factory.mktemp("cache")), load_topics(CONVERSATIONS)
    )
    with BackgroundServer(create_app(explorer, body_timeout=0.5), head_timeout=0.5) as server:
        yield server
    explorer.close()


def connect(server, sent: bytes):
    import socket

    connection = socket.create_connection(("127.0.0.1", server.port), timeout=30)  # the bound of a hang
    connection.sendall(sent)
    return connection


def received(connection) -> bytes:
    """All the server sends until it closes the connection."""
    data = b""
    while chunk := connection.recv(65_536):
        data += chunk
    return data


HEAD = b"POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_a_client_that_goes_away_mid_upload_is_one_log_line(served, caplog, capfd):
    import time

    with caplog.at_level("WARNING", logger="cast.explore.api"):
        connect(served, HEAD + b'Content-Length: 1000\r\n\r\n{"title": ').close()
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the disconnection on its own thread
    [record] = caplog.records
    assert "went away during its POST /api/conversations (after 10 bytes of its body)" in record.getMessage()
    assert "Traceback" not in capfd.readouterr().err


def test_a_slow_request_head_or_body_is_cut_off(served):
    import time

    started = time.monotonic()
    assert (
        received(connect(served, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")) == b""
    )  # head unfinished
    assert time.monotonic() - started < 10
    answer = received(connect(served, HEAD + b"Content-Length: 1000\r\n\r\n{"))
    assert answer.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.5 s" in answer
    assert b"connection: close" in answer.lower()
    healthy = received(
        connect(served, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    )
    assert healthy.startswith(b"HTTP/1.1 200 ")
