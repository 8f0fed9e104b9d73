"""bench/nuggets.py: the systems it builds from a judged sheet and the agreement it reports, on hand-made scores."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_scripts import load_bench_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nuggets():
    return load_bench_script("nuggets")


def test_the_controls_are_the_old_answers_first_sentence_and_the_next_turns_answer(nuggets):
    turns = [
        ("t1", {"old": {"text": "First one. Then more."}, "new": {"text": "New one."}}),
        ("t2", {"old": {"text": "Second turn."}, "new": {"text": "New two."}}),
    ]
    systems = nuggets.system_answers(turns)
    assert systems["old"] == {"t1": "First one. Then more.", "t2": "Second turn."}
    assert systems["new"] == {"t1": "New one.", "t2": "New two."}
    assert systems["old-first-sentence"] == {"t1": "First one.", "t2": "Second turn."}
    assert systems["other-turn"] == {"t1": "Second turn.", "t2": "First one. Then more."}


def test_agreement_is_reported_over_systems_and_over_turns(nuggets, capsys):
    def row(score: float, rouge: float, judged: float | None = None) -> dict[str, float]:
        values = {"all_strict": score, "all_partial": score, "vital_strict": score, "vital_partial": score}
        values |= {"ROUGE-L": rouge, "METEOR": rouge}
        return values | ({"answers": judged, "useful": judged} if judged is not None else {})

    # The nugget scores order the systems as ROUGE-L does, and the judged runs as the rubric does.
    rows = {
        "old": {"a": row(0.5, 20, 1), "b": row(0.4, 18, 0)},
        "new": {"a": row(0.9, 30, 2), "b": row(0.8, 28, 1)},
        "other-turn": {"a": row(0.0, 5), "b": row(0.1, 6)},
    }
    nuggets.report(rows)
    out = capsys.readouterr().out
    assert "| old | 0.450 | 0.450 | 0.450 | 0.450 | 19.000 | 19.000 | 0.500 | 0.500 |" in out
    assert "| other-turn | 0.050 | 0.050 | 0.050 | 0.050 | 5.500 | 5.500 | - | - |" in out
    tau = out.split("Kendall's tau")[1].split("Spearman")[0]
    assert "| vital_strict | 1.00 | 1.00 | 1.00 | 1.00 |" in tau
    rho = out.split("Spearman's rho")[1]
    # Per turn the rubric ties two answers (old a, new b: 1) that the nugget scores tell apart (0.5, 0.8).
    assert "| all_strict | 1.00 | 1.00 | 0.95 | 0.95 |" in rho
