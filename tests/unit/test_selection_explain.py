"""``cast explain``: rendering a turn's entity graph from an answers file."""

from __future__ import annotations

import argparse
import json

import pytest

from cast.commands import explain
from cast.core.records import EntityMention, Passage, ScoredPassage, to_dict
from cast.core.stages import SelectionInput
from cast.entity.select.selection import EntityGraphSelector, OriginalOrderSelector
from cast.errors import CastError, DataFormatError

DBPEDIA = "http://dbpedia.org/resource/"


def selection_input() -> SelectionInput:
    def mentions(*titles):
        return tuple(EntityMention(t, 0, len(t), DBPEDIA + t, 0.9, "test") for t in titles)

    return SelectionInput(
        query="q",
        candidates=tuple(ScoredPassage(Passage(f"p{k}", "text."), 1.0 - k / 10) for k in range(3)),
        query_entities=mentions("Glasgow"),
        passage_entities=(
            mentions("Glasgow", "COP26"),
            mentions("Climate_change"),
            mentions("COP26", "Paris"),
        ),
    )


@pytest.fixture
def answers(tmp_path):
    path = tmp_path / "answers.jsonl"
    records = [
        {"qid": "1_1", "selection": to_dict(EntityGraphSelector(n=2).select(selection_input()))},
        {"qid": "1_2", "selection": to_dict(OriginalOrderSelector().select(selection_input()))},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def run(answers, qid, out) -> int:
    parser = argparse.ArgumentParser()
    explain.add_parser(parser.add_subparsers())
    args = parser.parse_args(["explain", "--answers", str(answers), "--qid", qid, "--out", str(out)])
    return args.func(args)


def test_explain_writes_a_png(answers, tmp_path):
    out = tmp_path / "figures" / "graph.png"
    assert run(answers, "1_1", out) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in out.parent.iterdir()] == ["graph.png"]  # no partial file left behind


def test_explain_errors_are_clear(answers, tmp_path):
    with pytest.raises(CastError, match="does not exist"):
        run(tmp_path / "missing.jsonl", "1_1", tmp_path / "g.png")
    with pytest.raises(CastError, match="'9_9' is not in"):
        run(answers, "9_9", tmp_path / "g.png")
    with pytest.raises(CastError, match="no graph to draw"):
        run(answers, "1_2", tmp_path / "g.png")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"qid": "1_1"}\n{not json\n')
    with pytest.raises(DataFormatError, match="broken.jsonl:1: turn 1_1 has no 'selection'"):
        run(broken, "1_1", tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()
