"""The real CAsT topic files and qrels of ../shared/data."""

from __future__ import annotations

import pytest

from cast.formats.topics import load_topics, read_qrels

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
