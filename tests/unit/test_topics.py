"""Topic loaders and qrels reader: a sample conversation, bad input (the real CAsT files of ../shared/data:
test_topics_data.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.errors import DataFormatError, EmptyUtteranceError
from cast.formats.topics import load_topics, read_qrels, read_rewrites


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- the sample-conversation format ----------------------------------------------------------------------


def test_sample_conversation_fixture(fixtures):
    (conversation,) = load_topics(fixtures / "topics" / "sample_conversation.json")
    assert conversation.topic_id == "demo-1"
    assert conversation.title == "Throat cancer"
    assert [turn.qid for turn in conversation.turns] == ["demo-1_1", "demo-1_2", "demo-1_3"]
    assert conversation.turns[0].manual_rewrite is None
    assert conversation.turns[1].manual_rewrite == "Is throat cancer treatable?"


def test_sample_list_with_all_turn_fields(tmp_path):
    path = write(
        tmp_path,
        "mine.json",
        json.dumps(
            [
                {"topic_id": 7, "turns": [{"utterance": "Who wrote Dune?", "response_ids": ["WIKI13_1-0"]}]},
                {
                    "topic_id": "b",
                    "turns": [{"utterance": "a?", "automatic_rewrite": "b?", "response": "c."}],
                },
            ]
        ),
    )
    first, second = load_topics(path, rewrites={"7_1": "Who wrote the novel Dune?"})
    assert first.turns[0].qid == "7_1"
    assert first.turns[0].response_ids == ("WIKI13_1-0",)
    assert first.turns[0].manual_rewrite == "Who wrote the novel Dune?"
    assert (second.turns[0].automatic_rewrite, second.turns[0].response) == ("b?", "c.")


def test_fmt_forces_a_format(tmp_path):
    path = write(tmp_path, "t.json", json.dumps({"topic_id": "x", "turns": [{"utterance": "hi?"}]}))
    assert load_topics(path, fmt="sample")[0].turns[0].qid == "x_1"
    with pytest.raises(DataFormatError, match="a CAsT topics file is a JSON list"):
        load_topics(path, fmt="cast")
    with pytest.raises(ValueError, match="unknown topics format"):
        load_topics(path, fmt="trec")


# --- bad input ------------------------------------------------------------------------------------


def cast_topics(*turns: dict, number=31) -> str:
    return json.dumps([{"number": number, "turn": list(turns)}])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"number": 31, "turn": [', "not valid JSON"),
        ('{"number": 31}', "not a topics file"),
        ('[{"number": 31, "turn": []}]', "topic #1 has no 'turn' list"),
        (json.dumps([{"turn": [{"number": 1, "raw_utterance": "a"}]}]), "topic #1 has no 'number'"),
        (cast_topics({"raw_utterance": "a"}), "topic 31, turn #1 has no 'number'"),
        (cast_topics({"number": "one", "raw_utterance": "a"}), "turn #1 has 'number' 'one'"),
        (cast_topics({"number": 1}), "turn 31_1 needs exactly one of 'raw_utterance' or 'utterance'"),
        (cast_topics({"number": 1, "raw_utterance": 5}), "turn 31_1's 'raw_utterance' is int"),
        (
            cast_topics({"number": 1, "raw_utterance": "a"}, {"number": 1, "raw_utterance": "b"}),
            r"topic 31 lists turns \['31_1'\] more than once",
        ),
        (cast_topics({"number": "1-1", "utterance": "a", "provenance": "P1"}), "'provenance' must be a list"),
        (json.dumps({"turns": [{"utterance": "a"}]}), "needs a 'topic_id' without spaces"),
        (json.dumps({"topic_id": "x", "turns": [{"text": "a"}]}), "turn x_1 needs an 'utterance'"),
        (
            json.dumps({"topic_id": "x", "turns": [{"utterance": "a", "manual_rewirte": "b"}]}),
            r"turn x_1 has unknown keys \['manual_rewirte'\]",
        ),
        (
            json.dumps([{"topic_id": "x", "turns": [{"utterance": "a"}]}] * 2),
            "conversation #2 repeats topic_id 'x'",
        ),
    ],
)
def test_malformed_topics_name_the_file_and_the_problem(tmp_path, text, message):
    path = write(tmp_path, "topics.json", text)
    with pytest.raises(DataFormatError, match=message) as caught:
        load_topics(path)
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(str(path))


def test_malformed_json_names_the_line(tmp_path):
    path = write(tmp_path, "topics.json", '[\n{"number": 31,\n "turn": [}\n]')
    with pytest.raises(DataFormatError) as caught:
        load_topics(path)
    assert caught.value.line == 3


def test_missing_file(tmp_path):
    for read in (load_topics, read_qrels, read_rewrites):
        with pytest.raises(DataFormatError, match="no such file") as caught:
            read(tmp_path / "absent.json")
        assert caught.value.path == str(tmp_path / "absent.json")


@pytest.mark.parametrize(
    "turn",
    [
        {"number": 2, "raw_utterance": "  "},
        {"number": 2, "raw_utterance": "ok?", "manual_rewritten_utterance": ""},
        {"number": 2, "raw_utterance": "ok?", "automatic_rewritten_utterance": " "},
    ],
)
def test_empty_utterance_or_rewrite_is_reported_with_qid_and_file(tmp_path, turn):
    path = write(tmp_path, "topics.json", cast_topics({"number": 1, "raw_utterance": "a?"}, turn))
    with pytest.raises(EmptyUtteranceError, match="31_2") as caught:
        load_topics(path)
    assert str(path) in str(caught.value)


def test_empty_sample_utterance_is_reported(tmp_path):
    path = write(tmp_path, "mine.json", json.dumps({"topic_id": "x", "turns": [{"utterance": ""}]}))
    with pytest.raises(EmptyUtteranceError, match="x_1"):
        load_topics(path)


def test_rewrites_tsv(tmp_path):
    topics = write(tmp_path, "topics.json", cast_topics({"number": 1, "raw_utterance": "a?"}))
    good = write(tmp_path, "good.tsv", "31_1\t  Rewritten a?  \n\n")
    assert load_topics(topics, rewrites=good)[0].turns[0].manual_rewrite == "Rewritten a?"
    assert load_topics(topics, automatic_rewrites=good)[0].turns[0].automatic_rewrite == "Rewritten a?"

    no_tab = write(tmp_path, "no_tab.tsv", "31_1\tfine\n31_2 no tab here\n")
    with pytest.raises(DataFormatError, match="found no tab") as caught:
        load_topics(topics, rewrites=no_tab)
    assert (caught.value.path, caught.value.line) == (str(no_tab), 2)

    # A topics file cut to some conversations takes the whole rewrites file: other topics' rewrites are unused.
    other_topics = write(tmp_path, "other.tsv", "31_1\tfine\n99_1\tanother topic\n")
    assert load_topics(topics, rewrites=other_topics)[0].turns[0].manual_rewrite == "fine"

    other_turn = write(tmp_path, "other_turn.tsv", "31_1\tfine\n31_9\tanother version's turn\n")
    with pytest.raises(DataFormatError, match=r"not turns of these topics, e\.g\. \['31_9'\]") as caught:
        load_topics(topics, rewrites=other_turn)
    assert caught.value.path == str(other_turn)

    other_year = write(tmp_path, "other_year.tsv", "81_1\tanother year\n")
    with pytest.raises(DataFormatError, match=r"none of its 1 rewrites names a turn of these topics"):
        load_topics(topics, rewrites=other_year)

    empty = write(tmp_path, "empty.tsv", "31_1\t \n")
    with pytest.raises(EmptyUtteranceError, match=f"{empty}:1: the rewrite of turn 31_1 is empty"):
        load_topics(topics, rewrites=empty)

    twice = write(tmp_path, "twice.tsv", "31_1\ta\n31_1\tb\n")
    with pytest.raises(DataFormatError, match="qid 31_1 appears a second time"):
        read_rewrites(twice)


def test_qrels_tolerate_whitespace_and_keep_string_ids(tmp_path):
    path = write(tmp_path, "q.qrel", "001_1 0 D1 2\n\n  001_1\tQ0   0042  0 \n001_2 0 D1 1\r\n")
    assert read_qrels(path) == {"001_1": {"D1": 2, "0042": 0}, "001_2": {"D1": 1}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("31_1 0 D1 1\n31_1 0 D2\n", "found 3 fields"),
        ("31_1 0 D1 1\n31_1 0 D2 high\n", "relevance 'high' is not a grade: an integer from -100 to 100"),
    ],
)
def test_malformed_qrels_line_names_file_and_line(tmp_path, text, message):
    path = write(tmp_path, "bad.qrel", text)
    with pytest.raises(DataFormatError, match=message) as caught:
        read_qrels(path)
    assert (caught.value.path, caught.value.line) == (str(path), 2)
