"""The demo sample (cast/data/sample/): its files (its conversation answered from its collection:
test_index_sample_retrieval.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.index.collections import read_passages

SAMPLE = Path(__file__).resolve().parents[2] / "cast" / "data" / "sample"


@pytest.fixture(scope="module")
def conversation() -> dict:
    return json.loads((SAMPLE / "conversation.json").read_text())


def test_sample_files_and_attribution(conversation: dict) -> None:
    passages = list(read_passages(SAMPLE / "passages.jsonl.gz"))
    assert 2000 <= len(passages) <= 6000  # "a few thousand"
    assert len({p.id for p in passages}) == len(passages)
    assert all(p.text and p.title for p in passages)
    attribution = (SAMPLE / "ATTRIBUTION.md").read_text()
    assert "CC BY-SA 3.0" in attribution
    for title in {p.title for p in passages}:
        assert f"| {title} |" in attribution
    assert set(conversation) == {"topic_id", "title", "turns"}
    assert all(set(turn) == {"utterance", "manual_rewrite"} for turn in conversation["turns"])
