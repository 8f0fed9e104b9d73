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
    code, err = sweep("--grid", "selector.weight=0.5", "--grid", "summarizer.words=50")
    assert code == 0, err  # other names: kept beside them
    code, err = sweep("--grid", "ptkb.threshold=0,1")
    line = one_error_line(err)
    assert (
        code == 1 and "holds a point threshold=0 made with selector.threshold=0, not ptkb.threshold=0" in line
    )
    code, err = sweep("--grid", "selector.threshold=0,1")
    assert code == 0 and err.count("(finished earlier)") == 2


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


def test_a_run_whose_turns_retrieve_nothing_is_finished(capsys, core_index, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topic_id": "z", "turns": [{"utterance": "Xyzzy plugh?"}]}))
    code, _, err = cast(
        capsys, "run", *BASELINE, "--set", "rewriter.name=raw", "--index", core_index, "--topics", topics,
        "--output", tmp_path / "r",
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "r.run").read_text() == "" and json.loads((tmp_path / "r.answers.jsonl").read_text())[
        "qid"
    ] == "z_1"


# --- damaged data of shapes not met before ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "wrong"), [([1, 2], "all"), ({"documents": 6, "stemmer": "krovetz"}, "inputs"), ({"documents": "6", "inputs": []}, "documents")]
)  # fmt: skip
def test_a_damaged_build_record_is_one_line_with_the_rebuild(core_index, tmp_path, record, wrong):
    from cast.core.resources import Resources

    index = Path(shutil.copytree(core_index, tmp_path / "index"))
    (index / "cast-build.json").write_text(json.dumps(record))
    with pytest.raises(DataFormatError, match=rf"not a build record \(wrong or missing: {wrong}\); rebuild the index with `cast index build --input"):  # fmt: skip
        Resources({"index": str(index)}).stemmer  # noqa: B018


def test_a_cache_entry_of_the_wrong_shape_is_recomputed_with_one_warning(tmp_path, caplog, one_torch_thread):
    import sqlite3

    from cast.core.config import load_config
    from cast.core.resources import Resources

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
    same_origin = client.post("/api/conversations", json=body, headers={"Origin": "http://127.0.0.1:8000"})
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
