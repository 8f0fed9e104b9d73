"""The demo sample's conversation is answerable from its collection."""

from __future__ import annotations

import pytest
from test_index_sample import (
    SAMPLE,
    conversation,  # noqa: F401  (fixtures)
)

from cast.index.build import build_index
from cast.infra.resources import Resources
from cast.rank.first_stage import LMDFirstStage

# A passage answering each turn's manual rewrite (read from the sample).
ANSWERS = [
    "WIKI13_20408-1",  # "a Polish and naturalized-French physicist and chemist"
    "WIKI13_21201-52",  # "Her husband, Pierre Curie, shared the 1903 Physics prize"
    "WIKI13_24509-16",  # "Pierre Curie died in a street accident in Paris"
    "WIKI13_23325-13",  # polonium "was discovered by Marie and Pierre Curie"
    "WIKI13_20408-47",  # "she died ... from aplastic anemia believed to have been contracted from ... radiation"
    "WIKI13_23325-13",  # "named after Marie Curie's native land of Poland"
]
# The offline profile's re-ranking depth: a passage LMD ranks within it can be re-ranked to the top.
DEPTH = 100


@pytest.mark.slow
def test_manual_rewrites_retrieve_their_answers(
    conversation: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    index_dir = tmp_path_factory.mktemp("sample") / "index"
    build_index([SAMPLE / "passages.jsonl.gz"], index_dir, progress=False)
    lmd = LMDFirstStage(Resources({"index": str(index_dir)}), mu=1000, k=DEPTH)
    rewrites = [turn["manual_rewrite"] for turn in conversation["turns"]]
    for rewrite, answer, ranking in zip(rewrites, ANSWERS, lmd.search_batch(rewrites), strict=True):
        assert answer in [sp.id for sp in ranking], rewrite
