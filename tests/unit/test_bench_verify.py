"""bench/begin.py and bench/abstention.py on hand-computed examples: AUC, accuracy at the best threshold, BEGIN
rows, abstention rates and precision."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from cast.errors import DataFormatError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def begin():
    return load_bench_script("begin")


@pytest.fixture(scope="module")
def abstention():
    return load_bench_script("abstention")


def test_auc_is_the_chance_a_positive_outscores_a_negative(begin):
    # positives 0.9, 0.5; negatives 0.5, 0.1: pairs (0.9 > 0.5) (0.9 > 0.1) (0.5 = 0.5: half) (0.5 > 0.1)
    assert begin.roc_auc([0.9, 0.5, 0.5, 0.1], [True, True, False, False]) == pytest.approx(3.5 / 4)
    assert begin.roc_auc([0.1, 0.9], [True, False]) == 0.0
    assert math.isnan(begin.roc_auc([0.1, 0.9], [True, True]))


def test_best_threshold_accuracy_tries_every_cut(begin):
    assert begin.best_threshold_accuracy([0.9, 0.2, 0.5, 0.1], [True, False, True, False]) == 1.0
    assert begin.best_threshold_accuracy([0.1, 0.9], [True, False]) == 0.5  # the best: all one class
    assert begin.best_threshold([0.9, 0.2, 0.5, 0.1], [True, False, True, False]) == (0.5, 1.0)  # the lowest


def test_begin_rows_are_read_as_written_and_checked(begin, tmp_path):
    path = tmp_path / "b.tsv"
    header = "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"
    path.write_text(header + 't5\twow\tA "quoted" fact.\thi\tA fact.\tFully attributable\n')
    [row] = begin.read_begin(path)
    assert row["knowledge"] == 'A "quoted" fact.' and row["begin_label"] == "Fully attributable"
    path.write_text(header + "t5\twow\tA fact.\thi\tA fact.\tMaybe\n")
    with pytest.raises(DataFormatError, match=r"b.tsv:2"):
        begin.read_begin(path)


def test_abstention_rates_and_precision(abstention):
    relevant = {"1_1": True, "1_2": True, "2_1": False, "2_2": False}
    abstained = {"1_1": True, "1_2": False, "2_1": True, "2_2": True}
    without, with_, precision, count = abstention.rates(abstained, relevant)
    assert (without, with_, precision, count) == (1.0, 0.5, 2 / 3, 3)


def test_a_threshold_abstains_below_it_or_where_no_claim_is_supported(abstention):
    def record(relevance, supported):
        return {"verification": {"relevance": relevance, "claims": [{"supported": supported}]}}

    records = {"1_1": record(0.7, True), "1_2": record(0.3, True), "1_3": record(0.9, False)}
    assert abstention.decisions(records, 0.5) == {"1_1": False, "1_2": True, "1_3": True}


def test_constructed_cases_pair_each_turn_with_its_own_and_another_topics_passages(
    abstention, tmp_path, monkeypatch
):
    from cast.core.records import Conversation, Turn

    data = tmp_path
    for topics, passages in abstention.CONSTRUCTED.values():
        (data / passages).parent.mkdir(parents=True, exist_ok=True)
        (data / topics).write_text("[]")
        (data / passages).write_text("")
    cast_passages = data / abstention.CONSTRUCTED["cast2022"][1]
    cast_passages.write_text(
        '{"id": "p1", "title": "Curie", "contents": "She won twice."}\n'
        '{"id": "p2", "title": "Moon", "contents": "It is rock."}\n'
    )
    ikat_passages = data / abstention.CONSTRUCTED["ikat2023-train"][1]
    ikat_passages.write_text(
        '{"doc_id": "d", "passage_id": "0", "passage_text": " Cheese is made of milk. "}\n'
    )
    assert abstention.provenance_texts(cast_passages) == {
        "p1": "Curie She won twice.",
        "p2": "Moon It is rock.",
    }
    assert abstention.provenance_texts(ikat_passages) == {"d:0": "Cheese is made of milk."}

    def turn(qid, response, ids):
        return Turn(
            qid, qid.split("_")[0], qid.split("_")[1], "u", f"{qid}?", response=response, response_ids=ids
        )

    conversations = {
        abstention.CONSTRUCTED["cast2022"][0]: [
            Conversation("1", (turn("1_1", "Twice.", ("p1",)), turn("1_2", None, ("p1",)))),
            Conversation("2", (turn("2_1", "Rock.", ("p2", "gone")),)),
        ],
    }
    monkeypatch.setattr(
        "cast.formats.topics.load_topics", lambda path: conversations.get(str(path.relative_to(data)), [])
    )
    cases = abstention.constructed_cases(data)
    assert cases == [
        ("1_1", "1_1?", "Twice.", ["Curie She won twice."], True),
        ("1_1~other", "1_1?", "Twice.", ["Moon It is rock."], False),
        ("2_1", "2_1?", "Rock.", ["Moon It is rock."], True),
        ("2_1~other", "2_1?", "Rock.", ["Curie She won twice."], False),
    ]
