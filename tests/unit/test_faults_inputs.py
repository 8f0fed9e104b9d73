"""Hostile and odd inputs, read whole or line by line: each gives one error line naming the file (and line), found
before the input is read where it can be, and never a traceback, a hang or a file that grows without bound.

Devices are real (``/dev/zero``; a FIFO: test_faults_inputs_processes.py), oversized files are sparse (no
disk used), and every strict rule of the one reader (``cast/formats/textfiles.py``) is tried on each kind of
file that goes through it.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import time
from pathlib import Path

import pytest
from test_cli_audit import cast, one_error_line
from test_faults import write

from cast.core.config import load_config
from cast.errors import ConfigError, DataFormatError
from cast.formats.topics import load_topics

CONVERSATIONS = Path(__file__).parent.parent / "fixtures" / "core" / "conversations.json"
IKAT_TOPICS = Path(__file__).parent.parent / "fixtures" / "ikat" / "2024_test_topics.json"


def sample_topics(utterance: str = "Who was Marie Curie?", topic_id: str = "t") -> str:
    return json.dumps({"topic_id": topic_id, "turns": [{"utterance": utterance}]})


# --- whole inputs without bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--topics", "/dev/zero", "--output", "OUT"], "/dev/zero: is a device, not a file"),
        (["validate", "--format", "ikat2023", "/dev/zero"], "/dev/zero: is a device, not a file"),
        (["validate", "--format", "ikat2025", "/dev/zero"], "/dev/zero: is a device, not a file"),
        (["eval", "retrieval", "--run", "/dev/zero", "--qrels", "/dev/zero"], "/dev/zero: "),
        (["run", "--config", "/dev/zero", "--topics", str(CONVERSATIONS), "--output", "OUT"], "'/dev/zero'"),
        (["run", "--topics", str(CONVERSATIONS), "--rewrites", "/dev/zero", "--output", "OUT"], "a device"),
    ],
)
def test_a_device_is_refused_before_it_is_read(capsys, tmp_path, argv, message):
    argv = [str(tmp_path / "o") if a == "OUT" else a for a in argv]
    code, _, err = cast(capsys, *argv)
    assert code == 1
    assert message in one_error_line(err)


def test_a_topics_file_over_its_limit_is_refused_by_its_size(tmp_path):
    from cast.formats.textfiles import TOPICS_BYTES

    path = tmp_path / "topics.json"
    with path.open("wb") as f:
        f.truncate(TOPICS_BYTES + 1)  # sparse: nothing is written, and nothing may be read
    with pytest.raises(DataFormatError, match=r"16,777,217 bytes, more than a topics file may have"):
        load_topics(path)


def test_a_line_over_its_limit_is_refused_after_reading_only_that_much(tmp_path):
    from cast.formats.runfile import read_run
    from cast.formats.textfiles import RUN_LINE_BYTES

    path = write(tmp_path / "x.run", b"1_1 Q0 d1 1 2.0 t\n" + b"1" * (RUN_LINE_BYTES + 10) + b"\n")
    with pytest.raises(DataFormatError, match=r"x\.run:2: a line longer than 1,048,576 bytes"):
        read_run(path)


def test_standard_input_of_one_endless_line_stops_cast_answer_before_the_models_load(
    capsys, monkeypatch, tmp_path
):
    class Piped:  # what `head -c 1G /dev/zero | cast answer` gives: no line end in sight
        buffer = io.BytesIO(b"\0" * 200_000)

        @staticmethod
        def isatty() -> bool:
            return False

    monkeypatch.setattr(sys, "stdin", Piped)
    # The index does not exist: had the pipeline been built first, that would be the error.
    code, _, err = cast(capsys, "answer", "--index", tmp_path / "nowhere")
    assert code == 1
    assert "standard input:1: a line longer than 65,536 bytes" in one_error_line(err)
    assert Piped.buffer.tell() <= 65_537


def test_a_qid_of_100000_characters_is_refused(tmp_path):
    path = write(tmp_path / "topics.json", sample_topics(topic_id="x" * 100_000))
    with pytest.raises(DataFormatError, match=r"qid 'xxx.*longer than 100 characters"):
        load_topics(path)


# --- JSON that parses but is no input -----------------------------------------------------------------------------

BIG_INT = "1" * 5000
DEEP = "[" * 100_000 + "]" * 100_000


def ikat_run(score: str) -> str:
    passage = f'{{"id": "clueweb22-en0000-00-00000:0", "score": {score}, "used": true}}'
    response = f'{{"rank": 1, "text": "x", "passage_provenance": [{passage}], "ptkb_provenance": []}}'
    return f'{{"run_name": "r", "run_type": "automatic", "turns": [{{"turn_id": "1-1_1", "responses": [{response}]}}]}}'


@pytest.mark.parametrize(
    ("reader", "content", "message"),
    [
        ("topics", sample_topics().replace('"t"', BIG_INT), "an integer of 5,000 digits"),
        (
            "topics",
            '{"topic_id": "t", "turns": [{"utterance": "\\ud800 radium"}]}',
            r"'\\ud800' is half of a UTF-16",
        ),
        ("topics", '{"topic_id": NaN, "turns": []}', "NaN is not a number"),
        (
            "answers",
            '{"qid": "1_1", "n": ' + BIG_INT + "}\n",
            r":1: not a JSON object: an integer of 5,000 digits",
        ),
        ("answers", '{"qid": "1_1", "x": 1e999}\n', r":1: not a JSON object: 1e999 is beyond the range"),
        ("collection", '{"id": "p", "contents": "x", "n": ' + BIG_INT + "}\n", "an integer of 5,000 digits"),
        ("collection", DEEP + "\n", r":1: not a JSON object: nested too deeply"),
        ("ikat2023", ikat_run(BIG_INT), "an integer of 5,000 digits"),
        ("ikat2023", ikat_run("NaN"), "NaN is not a number"),
        ("ikat2023", DEEP, "nested too deeply"),
        ("ikat2025", DEEP + "\n", r":1: not valid JSON: nested too deeply"),
        ("ikat2023", b'{"run_name": "caf\xe9"}', r"not UTF-8 text \(byte 0xe9 at line 1, column 18\)"),
    ],
)
def test_json_that_parses_but_is_no_input_is_one_line_naming_the_file(tmp_path, reader, content, message):
    from cast.formats.answers import read_answers
    from cast.formats.ikat_runs import read_ikat_run
    from cast.index.collections import read_passages

    read = {
        "topics": load_topics,
        "answers": read_answers,
        "collection": lambda path: list(read_passages(path)),
        "ikat2023": lambda path: read_ikat_run(path, "ikat2023"),
        "ikat2025": lambda path: read_ikat_run(path, "ikat2025"),
    }[reader]
    path = write(tmp_path / ("input.jsonl" if reader in ("answers", "collection") else "input.json"), content)
    with pytest.raises(DataFormatError, match=message) as caught:
        read(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_valid_surrogate_pair_is_text(tmp_path):
    path = write(
        tmp_path / "topics.json", '{"topic_id": "t", "turns": [{"utterance": "\\ud83d\\ude00 radium"}]}'
    )
    assert load_topics(path)[0].turns[0].utterance == "\U0001f600 radium"


def test_cast_validate_refuses_a_nan_score_and_turn_ids_in_other_digits(capsys, tmp_path):
    code, _, err = cast(
        capsys, "validate", "--format", "ikat2023", write(tmp_path / "nan.json", ikat_run("NaN"))
    )
    assert code == 1 and "NaN is not a number" in one_error_line(err)
    arabic = write(tmp_path / "arabic.json", ikat_run("1.0").replace("1-1_1", "1-1_\u0663"))
    code, out, _ = cast(capsys, "validate", "--format", "ikat2023", arabic)
    assert code == 1 and "turn id '1-1_\u0663' is not '<topic>_<turn number>'" in out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:400] + bytes([data[400] ^ 0xFF]) + data[401:], "not a readable gzip file"),
        (lambda data: data[: len(data) // 2], "not a readable gzip file"),
        (lambda data: gzip.compress(b"[" * 100_000 + b"\n"), r":1: not a JSON object: nested too deeply"),
        (lambda data: gzip.compress(b'{"format": "1"}\n'), r":1: not a prepared-turns file"),
        (lambda data: gzip.compress(b'{"format": 1, "stop_after": "rerank", "description": []}\n'), "header"),
        (
            lambda data: _turn_changed(data, score="high"),
            r":2: not a prepared turn .*ranking\[0\]\.score = 'high'",
        ),
        (lambda data: _turn_changed(data, timings=[1]), r":2: not a prepared turn .*timings = \[1\]"),
    ],
)
def test_a_damaged_prepared_file_is_one_line_naming_it(tmp_path, damage, message):
    from cast.conversation.prepared import Prepared
    from cast.core.records import Passage, PreparedTurn, Rewrite, ScoredPassage, Turn

    turn = Turn(qid="1_1", topic_id="1", turn_id="1", utterance="Who?")
    ranking = tuple(ScoredPassage(Passage(f"p{n}", "text " * 50), float(-n)) for n in range(40))
    prepared = Prepared("rerank", {}, {"1_1": PreparedTurn(turn, Rewrite("Who?", "raw"), ranking)})
    path = prepared.save(tmp_path / "p.jsonl.gz")
    assert Prepared.load(path).turns["1_1"].ranking == ranking
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DataFormatError, match=message):
        Prepared.load(path)


def _turn_changed(data: bytes, **change: object) -> bytes:
    header, turn = gzip.decompress(data).decode().splitlines()
    record = json.loads(turn)
    if "score" in change:
        record["ranking"][0]["score"] = change["score"]
    else:
        record.update(change)
    return gzip.compress(f"{header}\n{json.dumps(record)}\n".encode())


# --- configs and settings -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tag: 5\n", "tag must be a string"),
        ("index: [1, 2]\n", "index must be a string"),
        ("cache_dir: 7\n", "cache_dir must be a string"),
        ("base: [offline]\n", r"base must be a string \(quote it: '...'\), got \['offline'\]"),
        ("selector: 5\n", "selector must be a mapping"),
        ("selector: {name: eg, gamma: 0.25, gamma: 0.9}\n", r":1: not valid YAML: key 'gamma' appears twice"),
        ("selector: {name: eg, gamma: .nan}\n", r":1: not valid YAML: .nan is not a finite number"),
        ("base: offline\nfirst_stage: {name: lmd, mu: .inf}\n", r":2: not valid YAML: .inf is not a finite"),
    ],
)
def test_a_config_value_of_the_wrong_kind_is_one_line(tmp_path, text, message):
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(path)
    assert "\n" not in str(caught.value)


def test_a_yaml_anchor_bomb_is_refused_at_once_in_a_short_line(tmp_path):
    levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 12)]
    path = write(tmp_path / "bomb.yaml", "\n".join(levels) + "\n")
    started = time.process_time()
    with pytest.raises(
        ConfigError, match=r"bomb\.yaml:2: not valid YAML: aliases \(\*a0\) are not allowed"
    ) as caught:
        load_config(path)
    assert len(str(caught.value)) < 300
    assert not list(tmp_path.glob("*.lock"))
    assert time.process_time() - started < 30  # the bound of a hang, not a speed target


@pytest.mark.parametrize(
    "override",
    ["selector.gamma=.nan", "selector.gamma=.inf", "first_stage.mu=.inf", "first_stage.mu=-.inf"],
)
def test_a_number_that_is_not_finite_is_refused_on_the_command_line(override):
    with pytest.raises(
        ConfigError, match=r"--set .*: the value is not valid YAML: .* is not a finite number"
    ):
        load_config("offline", [override])


def test_choosing_a_stage_keeps_the_settings_given_for_it_in_any_order(tmp_path):
    for overrides in (
        ["linker.entities_dir=/x", "linker.name=dictionary"],
        ["linker.name=dictionary", "linker.entities_dir=/x"],
    ):
        linker = load_config("offline", overrides)["linker"]
        assert linker == {"name": "dictionary", "entities_dir": "/x"}
    # A config's base chain: what a config sets for its own stage is kept whatever its base chose.
    parent = write(
        tmp_path / "parent.yaml", "base: offline\nlinker: {name: wikipedia, min_probability: 0.5}\n"
    )
    child = write(
        tmp_path / "child.yaml", f"base: {parent}\nlinker: {{entities_dir: /x, name: dictionary}}\n"
    )
    assert load_config(child)["linker"] == {"name": "dictionary", "entities_dir": "/x"}
    assert load_config(child, ["linker.name=dictionary"])["linker"]["entities_dir"] == "/x"
