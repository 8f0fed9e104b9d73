"""iKAT topic files (2023-2025 schemas), the iKAT passage-text collection format, and malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.core.records import PTKBStatement
from cast.errors import DataFormatError
from cast.formats.topics import load_topics
from cast.index.collections import read_passages


def test_2023_topics_keep_the_ptkb_on_the_conversation_and_the_qrels_qids(fixtures):
    conversations = load_topics(fixtures / "ikat" / "2023_test_topics.json")
    assert [c.topic_id for c in conversations] == ["9-1", "9-2"]
    first = conversations[0]
    assert first.ptkb[4] == PTKBStatement("5", "I'm vegetarian.")
    assert [t.qid for t in first.turns] == ["9-1_1", "9-1_2", "9-1_3"]
    assert first.turns[0].ptkb_relevant == ("5", "4", "2")
    assert first.turns[0].manual_rewrite.startswith("Can you help me find a diet for myself considering")
    assert first.turns[0].response_ids[0] == "clueweb22-en0035-25-01897:1"
    assert first.turns[0].response.startswith("Sure, these diets")


def test_2024_topics_have_integer_numbers(fixtures):
    conversations = load_topics(fixtures / "ikat" / "2024_test_topics.json")
    assert [c.topic_id for c in conversations] == ["0", "1"]
    assert conversations[0].turns[1].qid == "0_2"
    assert conversations[0].turns[1].ptkb_relevant == ("12",)
    assert conversations[0].ptkb[11].text == "I am from San Francisco, California."


def test_2025_topics_number_a_ptkb_list_and_map_relevant_texts_to_ids(fixtures):
    conversations = load_topics(fixtures / "ikat" / "2025_test_topics.json")
    first = conversations[0]
    assert first.ptkb[0] == PTKBStatement("1", "I want to stop doom scrolling.")
    third = first.turns[2]
    assert third.qid == "1-1_3"
    assert third.utterance == "How about the fruits I mentioned before?"
    # "I enjoy apple, kiwi, and watermelon." is the 20th statement, the Brazil one the 18th.
    assert third.ptkb_relevant == ("20", "18")
    assert len(third.response_ids) == 4


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _conversation(**changes):
    turn = {
        "turn_id": 1,
        "utterance": "Can you help me find a diet?",
        "resolved_utterance": "x",
        "response": "y",
    }
    turn.update(changes.pop("turn", {}))
    return {"number": "9-1", "title": "t", "ptkb": {"1": "I'm vegetarian."}, "turns": [turn], **changes}


@pytest.mark.parametrize(
    ("conversation", "names"),
    [
        (_conversation(number=None), "'number'"),
        (_conversation(ptkb="I'm vegetarian."), "'ptkb' is str"),
        (_conversation(turns=[]), "'turns'"),
        (_conversation(turn={"utterance": 3}), "turn 9-1_1: 'utterance' is int"),
        (_conversation(turn={"ptkb_provenance": [7]}), "turn 9-1_1: 'ptkb_provenance' names 7"),
        (_conversation(turn={"response_provenance": "clueweb22-en0000-00-00000:1"}), "'response_provenance'"),
        (_conversation(turn={"turn_id": None}), "turn #1: 'turn_id'"),
    ],
)
def test_a_malformed_file_gives_one_error_naming_the_file_and_the_field(tmp_path, conversation, names):
    path = _write(tmp_path, [conversation])
    with pytest.raises(DataFormatError) as error:
        load_topics(path)
    message = str(error.value)
    assert message.startswith(str(path))
    assert names in message
    assert "\n" not in message


def test_an_empty_resolved_utterance_is_read_as_none(tmp_path):
    path = _write(tmp_path, [_conversation(turn={"resolved_utterance": ""})])
    assert load_topics(path)[0].turns[0].manual_rewrite is None


def test_ikat_passage_texts_are_read_with_clueweb_passage_ids(tmp_path):
    path = tmp_path / "2023_test_topics_psg_text.jsonl"
    record = {
        "doc_id": "clueweb22-en0034-09-03452",
        "passage_id": "1",
        "passage_text": "\nDelft and Leiden.\n",
    }
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (passage,) = read_passages(path)
    assert passage.id == "clueweb22-en0034-09-03452:1"
    assert passage.text == "Delft and Leiden."
