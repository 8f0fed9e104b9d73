"""Topic loaders and qrels reader: the real CAsT files of ../shared/data, a sample conversation, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.errors import DataFormatError, EmptyUtteranceError
from cast.formats.topics import load_topics, read_qrels, read_rewrites

CAST_2019 = "cast/2019/evaluation_topics_v1.0.json"
CAST_2019_REWRITES = "cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv"
CAST_2020_MANUAL = "cast/2020/2020_manual_evaluation_topics_v1.0.json"
CAST_2020_AUTOMATIC = "cast/2020/2020_automatic_evaluation_topics_v1.0.json"
CAST_2021_MANUAL = "cast/2021/2021_manual_evaluation_topics_v1.0.json"
CAST_2021_AUTOMATIC = "cast/2021/2021_automatic_evaluation_topics_v1.0.json"
CAST_2022 = "cast/2022-dev/2022_evaluation_topics_flattened_duplicated_v1.0.json"
CAST_2022_AUTOMATIC = "cast/2022-dev/2022_automatic_evaluation_topics_flattened_duplicated_v1.0.json"


def turns_of(conversations):
    return [turn for conversation in conversations for turn in conversation.turns]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- the real CAsT files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "n_conversations", "n_turns"),
    [
        (CAST_2019, 50, 479),
        ("cast/2019/train_topics_v1.0.json", 30, 269),
        (CAST_2020_MANUAL, 25, 216),
        (CAST_2020_AUTOMATIC, 25, 216),
        ("cast/2020/automatic_evaluation_topics_annotated_v1.1.json", 25, 217),
        (CAST_2021_MANUAL, 26, 239),
        (CAST_2021_AUTOMATIC, 26, 239),
        (CAST_2022, 25, 139),
        (CAST_2022_AUTOMATIC, 25, 139),
    ],
)
def test_real_topic_files_load_with_their_counts(shared_data, relative, n_conversations, n_turns):
    conversations = load_topics(shared_data / relative)
    assert len(conversations) == n_conversations
    assert len(turns_of(conversations)) == n_turns
    for conversation in conversations:
        for turn in conversation.turns:
            assert turn.topic_id == conversation.topic_id
            assert turn.qid == f"{turn.topic_id}_{turn.turn_id}"
            assert turn.utterance.strip()


def test_2019_topics_take_the_resolved_tsv_as_manual_rewrites(shared_data):
    conversations = load_topics(shared_data / CAST_2019, rewrites=shared_data / CAST_2019_REWRITES)
    first = conversations[0]
    assert (first.topic_id, first.title) == ("31", "head and neck cancer")
    assert first.turns[1].qid == "31_2"
    assert first.turns[1].utterance == "Is it treatable?"
    assert first.turns[1].manual_rewrite == "Is throat cancer treatable?"
    assert all(turn.manual_rewrite for turn in turns_of(conversations))
    assert not any(turn.manual_rewrite for turn in turns_of(load_topics(shared_data / CAST_2019)))


def test_2020_files_carry_rewrites_and_canonical_result_ids(shared_data):
    manual = turns_of(load_topics(shared_data / CAST_2020_MANUAL))
    automatic = turns_of(load_topics(shared_data / CAST_2020_AUTOMATIC))
    assert manual[1].qid == "81_2"
    assert manual[1].manual_rewrite == "Now my garage door opener stopped working. Why?"
    assert manual[1].automatic_rewrite == "Why did garage door opener stop working?"
    assert manual[1].response_ids == ("MARCO_3942603",)
    assert automatic[1].manual_rewrite is None
    assert automatic[1].automatic_rewrite == "Why did garage door opener stop working?"
    assert automatic[1].response_ids == ("MARCO_5498474",)
    assert all(turn.manual_rewrite and len(turn.response_ids) == 1 for turn in manual)


@pytest.mark.parametrize("relative", [CAST_2021_MANUAL, CAST_2021_AUTOMATIC])
def test_2021_files_carry_the_canonical_passage_and_rewrites(shared_data, relative):
    turns = turns_of(load_topics(shared_data / relative))
    first = turns[0]
    assert first.qid == "106_1"
    assert first.automatic_rewrite == "What are the most common types of cancer in regards to breast biopsy?"
    assert first.response.startswith("More research is needed. Types Breast cancer can be")
    assert first.response_ids == ("MARCO_D59865-7",)
    assert all(turn.response and turn.automatic_rewrite for turn in turns)
    if relative == CAST_2021_MANUAL:
        assert all(turn.manual_rewrite for turn in turns)
        assert first.manual_rewrite.endswith("most common types of breast cancer?")
    else:
        assert not any(turn.manual_rewrite for turn in turns)


def test_2022_paths_carry_response_and_provenance(shared_data):
    conversations = load_topics(shared_data / CAST_2022)
    first_path = conversations[0]
    assert first_path.topic_id == "132"
    assert [turn.turn_id for turn in first_path.turns] == ["1-1", "1-3", "1-5", "1-7"]
    assert first_path.turns[1].qid == "132_1-3"
    assert first_path.turns[1].manual_rewrite == "Interesting. What are the effects of these climate changes?"
    assert first_path.turns[1].response.startswith("Climate change is very likely having an impact")
    assert first_path.turns[1].response_ids == ("MARCO_02_1687136851-3",)
    turns = turns_of(conversations)
    assert all(turn.response and turn.manual_rewrite for turn in turns)
    # 4 turns are clarifying questions of the system, with a response but no provenance.
    assert sum(1 for turn in turns if turn.response_ids) == 135
    # Paths share their prefixes: 139 turns, 108 distinct qids.
    assert len({turn.qid for turn in turns}) == 108


def test_2022_rewrites_of_both_files_can_be_combined(shared_data):
    automatic = {
        turn.qid: turn.automatic_rewrite for turn in turns_of(load_topics(shared_data / CAST_2022_AUTOMATIC))
    }
    turns = turns_of(load_topics(shared_data / CAST_2022, automatic_rewrites=automatic))
    assert turns[0].qid == "132_1-1"
    assert turns[0].automatic_rewrite == "What was Glasgow hosting COP26 about?"
    assert all(turn.manual_rewrite and turn.automatic_rewrite for turn in turns)


@pytest.mark.parametrize(
    ("topics", "qrels"),
    [
        (CAST_2019, "cast/2019/2019qrels.txt"),
        ("cast/2019/train_topics_v1.0.json", "cast/2019/train_topics_mod.qrel"),
        (CAST_2020_MANUAL, "cast/2020/2020qrels.txt"),
        (CAST_2020_AUTOMATIC, "cast/2020/2020qrels.txt"),
        (CAST_2021_MANUAL, "cast/2021/trec-cast-qrels-docs.2021.qrel"),
        (CAST_2021_AUTOMATIC, "cast/2021/trec-cast-qrels-docs.2021.qrel"),
        (CAST_2022, "cast/2022-dev/cast2022.qrel"),
        (CAST_2022, "cast/2022-dev/cast2022.provenance.qrel"),
        (CAST_2022_AUTOMATIC, "cast/2022-dev/cast2022.qrel"),
    ],
)
def test_every_judged_qid_is_a_loaded_turn(shared_data, topics, qrels):
    judged = set(read_qrels(shared_data / qrels))
    assert judged
    assert judged <= {turn.qid for turn in turns_of(load_topics(shared_data / topics))}


def test_real_qrels_read_with_string_ids_and_int_grades(shared_data):
    qrels = read_qrels(shared_data / "cast/2019/2019qrels.txt")  # this one writes "Q0" for the iteration
    assert len(qrels) == 173
    assert qrels["31_1"]["CAR_1463f964653c5c9f614a0a88d26b175e4a8120f1"] == 1
    provenance = read_qrels(shared_data / "cast/2022-dev/cast2022.provenance.qrel")
    assert provenance["132_1-1"]["MARCO_33_1621342262-1"] == 2
    assert sum(len(judgements) for judgements in provenance.values()) == 275


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
        ("31_1 0 D1 1\n31_1 0 D2 high\n", "relevance 'high' is not an integer"),
    ],
)
def test_malformed_qrels_line_names_file_and_line(tmp_path, text, message):
    path = write(tmp_path, "bad.qrel", text)
    with pytest.raises(DataFormatError, match=message) as caught:
        read_qrels(path)
    assert (caught.value.path, caught.value.line) == (str(path), 2)
