"""Comparison tables, reports and figures built from fixture runs and answers; the `cast eval` commands."""

from __future__ import annotations

import pandas as pd
import pytest

from cast.cli import main
from cast.core.records import Conversation, Turn
from cast.evaluate.plots import selector_settings
from cast.evaluate.report import compare, depths_from_qids, markdown_table, mean_by_depth, turn_depths
from cast.evaluate.significance import SIGNIFICANT_MARK, holm_bonferroni
from cast.evaluate.wordnet import nltk_data_dir

needs_wordnet = pytest.mark.skipif(
    not (nltk_data_dir() / "corpora" / "wordnet" / "lexnames").is_file(),
    reason="WordNet not set up: run scripts/setup_wordnet.sh",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _frame(values: dict[str, list[float]], qids: list[str]) -> pd.DataFrame:
    return pd.DataFrame(values, index=pd.Index(qids, name="qid"))


def test_compare_marks_significant_differences_only():
    qids = [f"q{i}" for i in range(12)]
    base = [0.1 * (i % 5) for i in range(12)]
    per_turn = {
        "base": _frame({"nDCG@3": base, "MAP": base}, qids),
        "better": _frame({"nDCG@3": [v + 0.2 for v in base], "MAP": base}, qids),
    }
    comparison = compare(per_turn, baseline="base")
    table = comparison.formatted()
    assert table.loc["better", "nDCG@3"].endswith(SIGNIFICANT_MARK)
    assert not table.loc["better", "MAP"].endswith(SIGNIFICANT_MARK)
    assert not table.loc["base", "nDCG@3"].endswith(SIGNIFICANT_MARK)
    assert comparison.means.loc["better", "nDCG@3"] == pytest.approx(sum(base) / 12 + 0.2)
    assert comparison.tests.loc[("better", "nDCG@3"), "n"] == 12
    assert "base" in comparison.legend()


def test_compare_pairs_only_shared_turns():
    per_turn = {"a": _frame({"m": [1.0, 0.0]}, ["q1", "q2"]), "b": _frame({"m": [1.0]}, ["q1"])}
    assert compare(per_turn, baseline="b").tests.loc[("a", "m"), "n"] == 1
    with pytest.raises(ValueError, match="not among the systems"):
        compare(per_turn, baseline="c")


def test_holm_bonferroni_by_hand():
    # Sorted 0.005, 0.01, 0.02, 0.04 are multiplied by 4, 3, 2, 1: 0.02, 0.03, 0.04, 0.04 (kept non-decreasing).
    assert holm_bonferroni([0.02, 0.01, 0.04, 0.005]) == pytest.approx([0.04, 0.03, 0.04, 0.02])
    # 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 is raised to the 0.06 before it.
    assert holm_bonferroni([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_bonferroni([0.6, 0.9]) == [1.0, 1.0]  # capped at 1
    assert holm_bonferroni([0.2]) == [0.2] and holm_bonferroni([]) == []


def test_holm_correction_over_systems_tested_against_one_baseline():
    qids = [f"q{i}" for i in range(12)]
    base = [0.1 * (i % 5) for i in range(12)]
    gains = [0.3, -0.1, 0.2, 0.1, 0.25, -0.05, 0.15, 0.1, 0.2, -0.1, 0.05, 0.1]
    per_turn = {
        "base": _frame({"m": base}, qids),
        "better": _frame({"m": [b + g for b, g in zip(base, gains, strict=True)]}, qids),
        "same1": _frame({"m": base}, qids),
        "same2": _frame({"m": base}, qids),
    }
    alone = compare(per_turn, baseline="base")
    corrected = compare(per_turn, baseline="base", correction="holm")
    raw_t, raw_r = alone.tests.loc[("better", "m"), ["t_test_p", "randomisation_p"]]
    assert raw_t < 0.05 and raw_r < 0.05 and alone.significant("better", "m")
    # The smallest of three p-values (the identical systems have p = 1) is multiplied by 3, beyond 0.05.
    row = corrected.tests.loc[("better", "m")]
    assert row["t_test_p_corrected"] == pytest.approx(3 * raw_t)
    assert row["randomisation_p_corrected"] == pytest.approx(3 * raw_r)
    assert corrected.tests.loc[("same1", "m"), "t_test_p_corrected"] == 1.0
    assert not corrected.significant("better", "m")
    assert not corrected.formatted().loc["better", "m"].endswith(SIGNIFICANT_MARK)
    assert "Holm-Bonferroni" in corrected.legend() and "3 systems" in corrected.legend()
    with pytest.raises(ValueError, match="unknown correction"):
        compare(per_turn, baseline="base", correction="bonferroni")


def test_depths_and_means_by_depth():
    turns = tuple(
        Turn(qid=f"132_{t}", topic_id="132", turn_id=t, utterance="u") for t in ("1-1", "1-3", "2-1")
    )
    other_path = tuple(Turn(qid=f"132_{t}", topic_id="132", turn_id=t, utterance="u") for t in ("1-1", "3-1"))
    depths = turn_depths([Conversation("132", turns), Conversation("132", other_path)])
    assert depths == {"132_1-1": 1, "132_1-3": 2, "132_2-1": 3, "132_3-1": 2}
    assert depths_from_qids(["31_1", "31_12", "132_1-3"]) == {"31_1": 1, "31_12": 12}
    table = mean_by_depth({"s": _frame({"m": [1.0, 0.5, 0.0, 0.25]}, list(depths))}, "m", depths)
    assert table["s"].to_dict() == {1: 1.0, 2: 0.375, 3: 0.0}


def test_markdown_table():
    frame = pd.DataFrame({"x": [0.5]}, index=pd.Index(["a"], name="system"))
    assert markdown_table(frame).splitlines() == ["| system | x |", "| --- | --- |", "| a | 0.5000 |"]


def test_selector_settings_from_record_then_name():
    record = {"config": {"selector": {"name": "eg", "gamma": 0.5, "n": 3, "path_bonus": 0.1}}}
    assert selector_settings(record, "whatever") == ("eg", 0.5, "path_bonus")
    assert selector_settings({"config": {"selector": {"name": "o"}}}, "x") == ("o", None, "")
    assert selector_settings({}, "lmd-er-g0.75") == ("er", 0.75, "")
    assert selector_settings({}, "eg-g0.25") == ("eg", 0.25, "")
    assert selector_settings({}, "eg.25+ep") == ("eg", 0.25, "ep")  # bench/answers.py labels
    assert selector_settings({}, "eg0") == ("eg", 0.0, "")
    assert selector_settings({}, "baseline") == (None, None, "")


def test_eval_retrieval_command(fixtures, tmp_path, capsys):
    folder = fixtures / "eval"
    per_turn = tmp_path / "per_turn.csv"
    code = main(
        ["eval", "retrieval", "--run", str(folder / "a.run"), str(folder / "b.run"), "--qrels",
         str(folder / "toy.qrels"), "--baseline", "a", "--per-turn", str(per_turn), "--csv", str(tmp_path / "t.csv")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "nDCG@3" in out and "0.6831" in out
    assert "1 run turns without judgements excluded" in out
    assert "1 judged turns missing from the run scored 0" in out
    rows = pd.read_csv(per_turn, dtype={"qid": str})
    assert len(rows) == 4 and set(rows["system"]) == {"a", "b"}
    assert pd.read_csv(tmp_path / "t.csv").shape == (2, 7)


def test_eval_retrieval_correction_option(fixtures, tmp_path, capsys):
    folder = fixtures / "eval"
    runs = [str(folder / "a.run"), str(folder / "b.run")]
    qrels = str(folder / "toy.qrels")
    assert (
        main(
            ["eval", "retrieval", "--run", *runs, "--qrels", qrels, "--baseline", "a", "--correction", "holm"]
        )
        == 0
    )
    assert "Holm-Bonferroni-corrected per measure over the 1 system tested" in capsys.readouterr().out
    out = tmp_path / "report"
    args = ["eval", "report", "--runs", *runs, "--qrels", qrels, "--baseline", "a", "--correction", "holm"]
    assert main([*args, "--out", str(out)]) == 0
    tests = pd.read_csv(out / "retrieval_tests.csv")
    assert {"t_test_p_corrected", "randomisation_p_corrected"} <= set(tests.columns)


def test_eval_retrieval_bad_run_is_one_line_error(fixtures, tmp_path, capsys):
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 2.0\n")
    assert (
        main(["eval", "retrieval", "--run", str(bad), "--qrels", str(fixtures / "eval" / "toy.qrels")]) == 1
    )
    assert "bad.run:1: expected 6 fields" in capsys.readouterr().err


def test_eval_answers_needs_passages_for_qrels_references(fixtures, capsys):
    folder = fixtures / "eval"
    args = [
        "eval",
        "answers",
        "--answers",
        str(folder / "o.answers.jsonl"),
        "--qrels",
        str(folder / "passages.qrels"),
    ]
    assert main(args) == 1
    assert "give --collection or --index" in capsys.readouterr().err


@needs_wordnet
def test_report_from_fixture_runs_and_answers(fixtures, tmp_path, capsys):
    folder = fixtures / "eval"
    out = tmp_path / "report"
    code = main(
        ["eval", "report", "--runs", str(folder / "a.run"), str(folder / "b.run"), "--qrels", str(folder / "toy.qrels"),
         "--answers", str(folder / "o.answers.jsonl"), str(folder / "eg-g0.25.answers.jsonl"),
         "--topics", str(folder / "topics.json"), "--collection", str(folder / "collection.jsonl"),
         "--baseline", "o", "--calibration", str(folder / "calibration.csv"), "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    report = (out / "report.md").read_text()
    assert "## Retrieval" in report and "## Answers" in report
    assert "| eg-g0.25 |" in report and "| b |" in report
    assert "written responses of topics.json (best score over references)" in report
    for figure in ("depth.png", "length.png", "method_gamma.png"):
        assert f"]({figure})" in report
        data = (out / figure).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000
    for table, rows in (("retrieval.csv", 2), ("answers.csv", 2), ("answers_per_turn.csv", 6)):
        assert len(pd.read_csv(out / table)) == rows
    tests = pd.read_csv(out / "answers_tests.csv")
    assert set(tests["system"]) == {"eg-g0.25"} and len(tests) == 9
    assert pd.read_csv(out / "answers_per_turn.csv")["depth"].tolist() == [1, 2, 3, 1, 2, 3]


@needs_wordnet
def test_report_without_calibration_or_depths_says_what_it_skipped(fixtures, tmp_path):
    folder = fixtures / "eval"
    out = tmp_path / "report"
    main(["eval", "report", "--answers", str(folder / "o.answers.jsonl"), "--qrels", str(folder / "passages.qrels"),
          "--collection", str(folder / "collection.jsonl"), "--out", str(out)])  # fmt: skip
    report = (out / "report.md").read_text()
    assert "Turn-depth figure skipped" in report
    assert "Answer-length figure skipped" in report
    assert (out / "method_gamma.png").is_file()


def test_report_with_unknown_baseline_fails(fixtures, tmp_path, capsys):
    folder = fixtures / "eval"
    args = ["eval", "report", "--runs", str(folder / "a.run"), "--qrels", str(folder / "toy.qrels"),
            "--baseline", "zzz", "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 1
    assert "--baseline 'zzz' is none of the systems" in capsys.readouterr().err


@needs_wordnet
def test_report_reads_cast_calibrate_tables(fixtures, tmp_path):
    folder = fixtures / "eval"
    tsv = tmp_path / "bart-large.tsv"
    tsv.write_text("min_length\taverage_words\n10\t14.000\n40\t45.500\n")
    out = tmp_path / "report"
    args = ["eval", "report", "--answers", str(folder / "o.answers.jsonl"), "--topics", str(folder / "topics.json"),
            "--calibration", str(tsv), str(folder / "calibration.csv"), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert (out / "length.png").read_bytes().startswith(PNG_SIGNATURE)
    bad = tmp_path / "bad.csv"
    bad.write_text("min_length,other\n1,2\n")
    assert main([*args[:-5], "--calibration", str(bad), "--out", str(out)]) == 1
