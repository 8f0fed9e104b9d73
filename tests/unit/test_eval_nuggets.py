"""Nugget evaluation's pure parts: the scores by hand, what a model's loose lists and labels read as, the nuggets
file, and the three steps against a scripted client (what each step sends and how it reads the replies)."""

from __future__ import annotations

import json
import math

import pytest

from cast.errors import DataFormatError
from cast.evaluate.nuggets import (
    Nugget,
    Nuggetizer,
    NuggetSettings,
    TurnNuggets,
    echoes,
    nugget_scores,
    parse_items,
    parse_labels,
    read_nuggets,
    write_nuggets,
)
from cast.infra.llm import ChatReply


def test_scores_by_hand():
    nuggets = [Nugget("a", "vital"), Nugget("b", "okay"), Nugget("c", "vital"), Nugget("d", "okay")]
    scores = nugget_scores(nuggets, ["partial_support", "support", "not_support", "partial_support"])
    # all: strict 1/4; partial (0.5 + 1 + 0 + 0.5) / 4. vital (a, c): strict 0/2, partial 0.5/2.
    assert scores == {"all_strict": 0.25, "all_partial": 0.5, "vital_strict": 0.0, "vital_partial": 0.25}


def test_a_turn_without_vital_nuggets_has_no_vital_score():
    scores = nugget_scores([Nugget("a", "okay")], ["support"])
    assert scores["all_strict"] == 1.0 and math.isnan(scores["vital_strict"])
    with pytest.raises(ValueError):
        nugget_scores([Nugget("a")], [])


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ('["Paris is the capital", "It is in France"]', ["Paris is the capital", "It is in France"]),
        ("Updated Nugget List: ['Paris is the capital', 'It is in France']", ["Paris is the capital", "It is in France"]),
        ("Here is the list:\n1. Paris is the capital\n2. It is in France", ["Paris is the capital", "It is in France"]),
        ("- Paris is the capital\n* It is in France\n", ["Paris is the capital", "It is in France"]),
        ('["Paris is the capital", "It is in', ['["Paris is the capital", "It is in']),  # cut: read as it is
        ("", []),
    ],
)  # fmt: skip
def test_lists_are_read_from_the_forms_models_write(reply, items):
    assert parse_items(reply) == items


@pytest.mark.parametrize(
    ("reply", "count", "kind", "labels"),
    [
        ("['support', 'not_support', 'partial_support']", 3, "support", ["support", "not_support", "partial_support"]),
        ("Support, Partial support, no support", 3, "support", ["support", "partial_support", "not_support"]),
        ("['support']", 2, "support", ["support", None]),
        ('["vital", "okay", "vital"]', 2, "importance", ["vital", "okay"]),
        ("I cannot label these.", 1, "importance", [None]),
    ],
)  # fmt: skip
def test_labels_are_read_in_order_and_missing_ones_are_none(reply, count, kind, labels):
    assert parse_labels(reply, count, kind) == labels


def test_the_nuggets_file_round_trips_and_refuses_a_wrong_label(tmp_path):
    turns = [TurnNuggets("1_1", "Who?", "responses", (Nugget("Curie", "vital"), Nugget("1898")))]
    path = tmp_path / "nuggets.jsonl"
    write_nuggets(path, turns)
    assert read_nuggets(path) == {"1_1": turns[0]}
    record = json.loads(path.read_text())
    record["nuggets"][0]["importance"] = "important"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataFormatError, match="importance 'important'"):
        read_nuggets(path)


class ScriptedClient:
    """Answers each request with the next scripted reply and keeps what was asked."""

    def __init__(self, replies: list[str]):
        self.replies = replies
        self.asked: list[list[dict[str, str]]] = []

    def complete_many(self, model, conversations, **parameters):
        self.asked += conversations
        return [ChatReply(self.replies.pop(0), None, None, "stop") for _ in conversations]


def test_the_three_steps_send_the_query_and_read_the_replies():
    client = ScriptedClient(
        [
            '["Curie discovered polonium", "in 1898"]',  # nuggets from the first batch of references
            '["Curie discovered polonium", "in 1898", "with Pierre"]',  # the second batch updates them
            "['vital', 'okay']",  # importance, two nuggets a request
            "I am not sure.",  # the third nugget's label left out
            "support, partial_support",  # support by the answer
            "Not supported.",
        ]
    )
    nuggetizer = Nuggetizer(client, NuggetSettings(model="m", batch=2))
    queries = {"1_1": "Who discovered polonium?"}
    texts = nuggetizer.create(queries, {"1_1": ["ref one", "ref two", "ref three"]})
    assert texts == {"1_1": ["Curie discovered polonium", "in 1898", "with Pierre"]}
    second = client.asked[1][-1]["content"]
    assert "Who discovered polonium?" in second and "[1] ref three" in second and '"in 1898"' in second
    labelled = nuggetizer.label(queries, texts)
    assert [n.importance for n in labelled["1_1"]] == ["vital", "okay", "okay"]
    support = nuggetizer.assign(queries, labelled, {"1_1": "Marie Curie found it."})
    assert support == {"1_1": ["support", "partial_support", "not_support"]}
    assert nuggetizer.unlabelled == 1


def test_the_prompts_own_words_are_no_nuggets_and_no_labels():
    client = ScriptedClient(
        [
            # SmolLM2-135M's replies: the instructions copied, around a nugget or alone
            "Update the list of atomic nuggets of information (1-12 words) to provide the information\n"
            "- Curie discovered polonium",
            'List in the form ["a", "b", ...] and a and b are strings',
            "Label each of the 1 nuggets either a vital or okay based on the following criteria.",
            "Label each of the 1 nuggets either as support, partial_support, or not_support.\n['support']",
        ]
    )
    nuggetizer = Nuggetizer(client, NuggetSettings(model="m"))
    queries = {"1_1": "Who discovered polonium?", "1_2": "When?"}
    texts = nuggetizer.create(queries, {"1_1": ["ref one"], "1_2": ["ref two"]})
    assert texts == {"1_1": ["Curie discovered polonium"], "1_2": []}
    labelled = nuggetizer.label(queries, texts)
    assert labelled["1_1"] == [Nugget("Curie discovered polonium", "okay")]  # the echo gave no label
    support = nuggetizer.assign(queries, labelled, {"1_1": "Marie Curie found it."})
    assert support == {"1_1": ["support"]}  # not the three labels the echoed line names
    assert nuggetizer.replies == {"create": 2, "label": 1, "assign": 1}
    assert nuggetizer.unusable == {"create": 1, "label": 1} and nuggetizer.echoed == 4


def test_an_echo_shares_a_run_of_words_with_the_instructions():
    runs = frozenset({("in", "a", "pythonic", "list", "format"), ("vital", "or", "okay")})
    assert echoes("Return them in a Pythonic list format, please", runs)
    assert echoes("vital or okay", runs)  # a short text: all of its words
    assert not echoes("Curie won in 1903", runs) and not echoes("vital okay", runs)
