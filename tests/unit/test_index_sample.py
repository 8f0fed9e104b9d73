"""The demo sample (cast/data/sample/): its files, and that its conversation is answerable from its collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.core.resources import Resources
from cast.index.build import build_index
from cast.index.collections import read_passages
from cast.rank.first_stage import LMDFirstStage

SAMPLE = Path(__file__).resolve().parents[2] / "cast" / "data" / "sample"

# A passage answering each turn's manual rewrite (read from the sample).
ANSWERS = [
    "WIKI13_20408-1",  # "a Polish and naturalized-French physicist and chemist"
    "WIKI13_23325-13",  # polonium "was discovered by Marie and Pierre Curie"
    "WIKI13_23325-13",  # "named after Marie Curie's native land of Poland"
    "WIKI13_21201-52",  # "Her husband, Pierre Curie, shared the 1903 Physics prize"
    "WIKI13_24509-16",  # "Pierre Curie died in a street accident in Paris"
    "WIKI13_25602-32",  # radium "was used in medicine ... as a cancer treatment", many such uses abandoned
]


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


@pytest.mark.slow
def test_manual_rewrites_retrieve_their_answers(
    conversation: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    index_dir = tmp_path_factory.mktemp("sample") / "index"
    build_index([SAMPLE / "passages.jsonl.gz"], index_dir, progress=False)
    lmd = LMDFirstStage(Resources({"index": str(index_dir)}), mu=1000, k=20)
    rewrites = [turn["manual_rewrite"] for turn in conversation["turns"]]
    for rewrite, answer, ranking in zip(rewrites, ANSWERS, lmd.search_batch(rewrites), strict=True):
        assert answer in [sp.id for sp in ranking], rewrite
