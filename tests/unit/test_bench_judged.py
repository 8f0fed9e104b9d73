"""The judged sample: a blind paired sheet filled in by hand, read back (cast.benchmark.judged) and scored with its
key (bench/judged.py)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from cast.benchmark.judged import judged_turns, read_sample
from cast.errors import CastError, DataFormatError

SAMPLE = Path(__file__).resolve().parents[2] / "bench" / "judged" / "sample.tsv"

REPO = Path(__file__).resolve().parents[2]

SHEET = """# Judging sheet

## 1. turn cast2022 132_1-1

ANSWER A: one
ANSWER B: two

A: answers=2 clean=1 correct=1 useful=1
B: answers=0 clean=1 correct=1 useful=0

## 2. turn ikat2023-train 1-1_2

A: answers=1 clean=0 correct=1 useful=0
B: answers=1 clean=1 correct=0 useful=0
"""
KEY = "number\tdataset\tqid\tA\tB\n1\tcast2022\t132_1-1\tnew\told\n2\tikat2023-train\t1-1_2\told\tnew\n"


@pytest.fixture(scope="module")
def judged():
    return load_bench_script("judged")


def test_a_filled_sheet_is_scored_per_run_and_paired(judged, tmp_path, capsys):
    (tmp_path / "sheet.md").write_text(SHEET)
    (tmp_path / "key.tsv").write_text(KEY)
    judged.score_sheet(Namespace(sheet=[tmp_path / "sheet.md"], key=tmp_path / "key.tsv"))
    out = capsys.readouterr().out
    # old: turn 1 B (0/1/1/0), turn 2 A (1/0/1/0); new: turn 1 A (2/1/1/1), turn 2 B (1/1/0/0)
    assert "| old | 2 | 0.50 | 0.0 | 50.0 | 100.0 | 0.0 |" in out
    assert "| new | 2 | 1.50 | 50.0 | 100.0 | 50.0 | 50.0 |" in out
    assert "on useful: better 1, equal 1, worse 0" in out
    assert "on answers: better 1, equal 1, worse 0" in out


def test_a_sheet_judged_in_parts_is_scored_as_one(judged, tmp_path, capsys):
    first, second = SHEET.split("## 2.")
    (tmp_path / "sheet-1.md").write_text(first)
    (tmp_path / "sheet-2.md").write_text("# Judging sheet\n\n## 2." + second)
    (tmp_path / "key.tsv").write_text(KEY)
    parts = [tmp_path / "sheet-1.md", tmp_path / "sheet-2.md"]
    judged.score_sheet(Namespace(sheet=parts, key=tmp_path / "key.tsv"))
    assert "| new | 2 | 1.50 | 50.0 | 100.0 | 50.0 | 50.0 |" in capsys.readouterr().out
    with pytest.raises(CastError, match="turn 2"):
        judged.score_sheet(Namespace(sheet=parts[:1], key=tmp_path / "key.tsv"))


def test_a_sheet_is_split_in_parts_of_consecutive_turns(judged, tmp_path):
    turns = list(range(5))
    parts = judged.sheet_parts(tmp_path / "sheet.md", turns, 2)
    assert [path.name for path, _ in parts] == ["sheet-1.md", "sheet-2.md"]
    assert [part for _, part in parts] == [turns[:3], turns[3:]]
    assert judged.sheet_parts(tmp_path / "sheet.md", turns, 1) == [(tmp_path / "sheet.md", turns)]
    with pytest.raises(CastError, match="--parts 6"):
        judged.sheet_parts(tmp_path / "sheet.md", turns, 6)


def test_a_sheet_left_blank_or_half_judged_is_refused(judged, tmp_path):
    (tmp_path / "key.tsv").write_text(KEY)
    (tmp_path / "blank.md").write_text(SHEET.replace("answers=2", "answers="))
    with pytest.raises(DataFormatError, match="left blank"):
        judged.score_sheet(Namespace(sheet=[tmp_path / "blank.md"], key=tmp_path / "key.tsv"))
    (tmp_path / "half.md").write_text(SHEET.replace("B: answers=0 clean=1 correct=1 useful=0\n", ""))
    with pytest.raises(CastError, match="turn 1"):
        judged.score_sheet(Namespace(sheet=[tmp_path / "half.md"], key=tmp_path / "key.tsv"))


def test_the_committed_sample_holds_80_turns_from_cast_2022_and_ikat_2023():
    sample = read_sample(SAMPLE)
    assert len(sample) >= 80 and len(set(sample)) == len(sample)
    sources = {dataset.split("-")[0] for dataset, _ in sample}
    assert sources == {"cast2022", "ikat2023"}


def test_each_judged_turn_carries_each_runs_answer_and_rubric(tmp_path):
    (tmp_path / "sheet.md").write_text(SHEET)
    (tmp_path / "key.tsv").write_text(KEY)
    [first, second] = judged_turns([tmp_path / "sheet.md"], tmp_path / "key.tsv")
    assert first[:2] == ("cast2022", "132_1-1")
    assert first[2]["new"] == {"text": "one", "answers": 2, "clean": 1, "correct": 1, "useful": 1}
    assert first[2]["old"]["text"] == "two"
    assert second[2]["old"]["text"] == ""  # the sheet shows no answer for it
