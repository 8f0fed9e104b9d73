"""Faults and hostile input: each defect the reliability audit found, as a regression test; here those that
need no index and no other process (on the fixture index: test_faults_index.py; with another process:
test_faults_processes.py).

Fault injection is real where it can be made so: caches and embedding stores are corrupted byte by byte, a
lock is held elsewhere, and a disk is full.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_audit import cast  # `cast` run in this process

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
    from cast.formats.answers import read_answers
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


# --- 6. collection ids ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"id": "a b", "contents": "x"}',
            r"c\.jsonl:2: record id 'a b' holds U\+0020 \(a space\), which run files",
        ),
        ('{"id": "a\\u200bb", "contents": "x"}', r"c\.jsonl:2: record id 'a\\u200bb' holds U\+200B"),
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


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("turns:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


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
