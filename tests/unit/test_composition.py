"""The pipeline's order, declared once (``COMPOSITION``), and what the prepared passes, sweeps and the explorer
read of it."""

from __future__ import annotations

import pytest

from cast.core.pipeline import (
    COMPOSITION,
    EARLY_STAGES,
    STAGE_KINDS,
    STEP_KINDS,
    STOP_POINTS,
    kinds_after,
    slots_after,
    useful_stop,
)
from cast.core.registry import STAGES, stage_class
from cast.errors import ConfigError


def test_the_declared_order_gives_the_kinds_steps_and_stop_points():
    assert STAGE_KINDS == ("rewriter", "first_stage", "reranker", "linker", "selector", "summarizer")
    assert list(STEP_KINDS) == [
        "ptkb", "rewrite", "first_stage", "rerank", "link", "select", "summarize", "verify"
    ]  # fmt: skip
    assert STOP_POINTS == ("rerank", "link")
    assert EARLY_STAGES == {
        "rerank": ("ptkb", "rewriter", "first_stage", "reranker"),
        "link": ("ptkb", "rewriter", "first_stage", "reranker", "linker"),
    }


def test_a_pass_leaves_the_later_stages_and_what_they_build_from():
    assert [slot.kind for slot in slots_after("rerank")] == ["linker", "selector", "summarizer", "verifier"]
    assert kinds_after("link") == {"selector", "knowledge_base", "summarizer", "verifier"}
    assert kinds_after("rerank") == kinds_after("link") | {"linker"}
    with pytest.raises(ConfigError, match="stops after one of rerank, link, not 'select'"):
        slots_after("select")


def test_every_slot_is_a_registered_kind_with_its_contract():
    for slot in COMPOSITION:
        for name in STAGES[slot.kind]:
            assert issubclass(stage_class(slot.kind, name), slot.contract), (slot.kind, name)


@pytest.mark.parametrize(("needs_entities", "latest", "stop"), [
    (True, "link", "link"), (False, "link", "rerank"), (True, "rerank", "rerank"),
])  # fmt: skip
def test_a_pass_links_only_for_a_selector_that_reads_entities(needs_entities, latest, stop):
    assert useful_stop(needs_entities, latest) == stop
