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

from cast.config import load_config
from cast.errors import ConfigError, DataFormatError
from cast.topics import load_topics


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


def test_non_utf8_config_names_the_file(tmp_path):
    path = write(tmp_path / "latin.yaml", "tag: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.yaml: not UTF-8 text \(byte 0xe9"):
        load_config(path)


def test_non_utf8_run_and_answers_files_name_file_and_line(tmp_path):
    from cast.evaluate.answers import read_answers
    from cast.runfile import read_run

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
