"""The pooled benchmark's comparison logic (cast.benchmark.pooled, which bench/pooled.py calls) on hand-made
per-turn tables: the regression gate, the per-dataset and pooled rows, the leave-one-topic-out choice and the
per-turn file's checks."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cast.benchmark import pooled
from cast.benchmark.datasets import DATASETS, load_dataset, topic_of
from cast.core.records import Conversation, Turn
from cast.errors import DataFormatError

REPO = Path(__file__).resolve().parents[2]
BASELINES = REPO / "bench" / "baselines"


def table(values: dict[str, list[float]], datasets=("a", "b"), turns: int = 40) -> pd.DataFrame:
    """``turns`` turns per dataset, 4 turns a topic; measures not given are a constant 0.5."""
    rows = []
    for d in datasets:
        for i in range(turns):
            row = {"dataset": d, "topic": f"{d}:{i // 4}", "qid": f"{i}"}
            for m in pooled.MEASURES:
                row[m] = values[m][i] if m in values else 0.5
            rows.append(row)
    return pd.DataFrame(rows)


def test_a_measure_worse_on_every_turn_is_named_and_fails_the_gate(capsys) -> None:
    baseline = table({"MRR": [0.6 + 0.001 * i for i in range(40)]})
    system = table({"MRR": [0.5 + 0.001 * i for i in range(40)]})
    tests = pooled.tests_against(system, baseline)
    assert set(tests) == {"a", "b", "pooled"}
    assert tests["pooled"]["MRR"].n == 80
    assert tests["pooled"]["MRR"].difference == pytest.approx(-0.1)
    assert tests["pooled"]["MRR"].significant
    assert not tests["pooled"]["ROUGE-L"].significant  # identical
    worse = pooled.print_summary("system", system, tests)
    assert worse == ["MRR"]
    assert "pooled: significantly WORSE on MRR" in capsys.readouterr().out


def test_noise_is_not_a_regression() -> None:
    baseline = table({"ROUGE-L": [10.0 + (i % 2) for i in range(40)]})
    system = table({"ROUGE-L": [10.0 + ((i + 1) % 2) for i in range(40)]})
    tests = pooled.tests_against(system, baseline)
    assert tests["pooled"]["ROUGE-L"].difference == pytest.approx(0.0)
    assert pooled.print_summary("system", system, tests) == []


def test_a_run_equal_to_its_baseline_file_but_for_the_files_rounding_equals_it(tmp_path) -> None:
    system = table({"MRR": [1 / (1 + i % 7) for i in range(40)], "ROUGE-L": [100 / 3 + i for i in range(40)]})
    pooled.write_per_turn(tmp_path / "baseline.tsv", system)
    baseline = pooled.read_per_turn(tmp_path / "baseline.tsv")
    assert (system["MRR"] != baseline["MRR"]).any()  # rounded in the file
    tests = pooled.tests_against(system, baseline)
    for measure in ("MRR", "ROUGE-L"):
        assert tests["pooled"][measure].difference == 0.0
        assert not tests["pooled"][measure].significant


def test_unjudged_turns_are_left_out_of_retrieval_tests() -> None:
    mrr = [float("nan") if i % 2 else 0.5 for i in range(40)]
    tests = pooled.tests_against(table({"MRR": mrr}), table({"MRR": mrr}))
    assert tests["a"]["MRR"].n == 20
    assert tests["a"]["ROUGE-L"].n == 40


def test_summary_counts_judged_and_answered_turns() -> None:
    mrr = [float("nan") if i < 10 else 1.0 for i in range(40)]
    means = pooled.summary(table({"MRR": mrr}))
    assert means.loc["a", "judged"] == 30
    assert means.loc["pooled", "answered"] == 80
    assert means.loc["pooled", "MRR"] == pytest.approx(1.0)


def test_leave_one_topic_out_answers_each_topic_with_the_system_best_elsewhere() -> None:
    # "better" wins on every topic but the first, where it is worse; chosen elsewhere, it answers topic a:0 too.
    base = table({}, datasets=("a",), turns=12)
    better = base.copy()
    better.loc[4:, list(pooled.HEADLINE)] = 0.9
    better.loc[:3, list(pooled.HEADLINE)] = 0.3
    pooled_rows, chosen = pooled.leave_one_topic_out({"base": base, "better": better}, "base")
    assert chosen == {"a:0": "better", "a:1": "better", "a:2": "better"}
    assert pooled_rows["MRR"].tolist() == [0.3] * 4 + [0.9] * 8
    assert pooled_rows["qid"].tolist() == base["qid"].tolist()


def test_leave_one_topic_out_keeps_the_baseline_when_nothing_is_better() -> None:
    base = table({}, datasets=("a",), turns=8)
    worse = base.copy()
    worse[list(pooled.HEADLINE)] = 0.4
    _, chosen = pooled.leave_one_topic_out({"base": base, "worse": worse}, "base")
    assert set(chosen.values()) == {"base"}


def test_per_turn_files_round_trip_and_foreign_tables_are_refused(tmp_path: Path) -> None:
    frame = table({"MRR": [float("nan")] * 40})
    path = tmp_path / "per-turn.tsv"
    pooled.write_per_turn(path, frame)
    back = pooled.read_per_turn(path)
    assert back["qid"].tolist() == frame["qid"].tolist()
    assert back["MRR"].isna().all()
    other = tmp_path / "other.tsv"
    other.write_text("qid\tscore\n1\t0.5\n")
    with pytest.raises(DataFormatError, match="no column 'dataset'"):
        pooled.read_per_turn(other)


def test_topics_group_conversations_of_one_topic() -> None:
    assert topic_of(DATASETS[1], Conversation("9-2", ())) == "ikat2023:9"
    assert topic_of(DATASETS[0], Conversation("132", ())) == "cast2022:132"


def test_the_committed_baseline_is_a_per_turn_table_of_every_dataset() -> None:
    frame = pooled.read_per_turn(BASELINES / "offline.tsv")
    assert set(frame["dataset"]) == {d.name for d in DATASETS}
    assert frame.groupby("dataset")["ROUGE-L"].count().to_dict() == {
        "cast2022": 108,
        "ikat2023-test": 147,
        "ikat2023-train": 95,
    }


def test_max_turns_keeps_the_first_distinct_turns_with_what_came_before(monkeypatch) -> None:
    def path(topic: str, *ids: str) -> Conversation:
        return Conversation(topic, tuple(Turn(f"{topic}_{i}", topic, i, f"u{i}") for i in ids))

    # Two paths of one tree sharing their first turns, then another topic.
    paths = [path("1", "1-1", "1-3"), path("1", "1-1", "1-3", "2-1", "2-3"), path("2", "1-1")]
    monkeypatch.setattr("cast.benchmark.datasets.load_topics", lambda _: paths)
    dataset = DATASETS[0]

    def kept(n):
        return [[t.qid for t in c.turns] for c in load_dataset(Path("data"), dataset, n)]

    assert kept(None) == [[t.qid for t in c.turns] for c in paths]
    assert kept(2) == [["1_1-1", "1_1-3"]]  # the second path adds nothing new within 2 turns
    assert kept(3) == [["1_1-1", "1_1-3"], ["1_1-1", "1_1-3", "1_2-1"]]
    assert kept(5) == [["1_1-1", "1_1-3"], ["1_1-1", "1_1-3", "1_2-1", "1_2-3"], ["2_1-1"]]


def test_topics_without_written_responses_are_scored_on_retrieval_alone(tmp_path: Path) -> None:
    # t1 ranks its relevant passage second (MRR 0.5), t2 first (1.0); no answers file is read.
    conversation = Conversation("1", (Turn("t1", "1", "1", "u1"), Turn("t2", "1", "2", "u2")))
    (tmp_path / "lmd.run").write_text("t1 Q0 p2 1 2.0 lmd\nt1 Q0 p1 2 1.0 lmd\nt2 Q0 p3 1 3.0 lmd\n")
    qrels = {"t1": {"p1": 1}, "t2": {"p3": 1}}
    frame = pooled.score_topics(
        "mine", [conversation], tmp_path / "lmd", qrels, tmp_path / "no-index", topics={"t1": "1", "t2": "1"}
    )
    assert list(frame.columns) == ["dataset", "topic", "qid", *pooled.MEASURES, *pooled.FORM]
    assert frame["qid"].tolist() == ["t1", "t2"] and set(frame["dataset"]) == {"mine"}
    assert frame["MRR"].tolist() == [0.5, 1.0]
    assert frame[list(pooled.ANSWERS)].isna().all().all()
    assert pooled.summary(frame).loc["pooled", "answered"] == 0
