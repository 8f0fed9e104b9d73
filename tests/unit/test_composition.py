"""The pipeline's order, declared once (``COMPOSITION``), and what the prepared passes, sweeps, the explorer and
the pipeline's construction, description and replacement of stages read of it."""

from __future__ import annotations

import pytest
from test_pipeline_without_index import baseline_config

from cast.core.pipeline import (
    COMPOSITION,
    EARLY_STAGES,
    STAGE_KINDS,
    STEP_KINDS,
    STOP_POINTS,
    Pipeline,
    Slot,
    SlotStage,
    kinds_after,
    slots_after,
    useful_stop,
)
from cast.core.registry import STAGES, stage_class
from cast.core.stages import Verifier
from cast.errors import ConfigError
from cast.summarize.verify import NoVerifier


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


class Critiqued(Pipeline):
    """A pipeline of one more optional slot than the toolkit's, declared only in its composition."""

    composition = (*COMPOSITION, Slot("critic", "critique", Verifier, optional=True))


@pytest.fixture
def config(tmp_path):
    return baseline_config(tmp_path / "nowhere")


def test_a_pipeline_holds_a_stage_for_each_slot_in_order(config):
    pipeline = Pipeline.from_config(config)
    assert list(pipeline.stages) == [slot.kind for slot in COMPOSITION]
    assert (
        pipeline.stages["ptkb"] is None and pipeline.stages["verifier"] is None
    )  # the config leaves them out
    assert pipeline.selector is pipeline.stages["selector"]
    assert list(pipeline.describe())[: len(STAGE_KINDS)] == list(STAGE_KINDS)
    with pytest.raises(AttributeError, match=r"with_stages\(selector=...\)"):
        pipeline.selector = pipeline.stages["selector"]


def test_each_typed_stage_attribute_is_a_slot():
    attributes = [name for name, value in vars(Pipeline).items() if isinstance(value, SlotStage)]
    assert attributes == [slot.kind for slot in COMPOSITION]


def test_a_slot_added_to_the_composition_is_built_described_and_replaced(config, monkeypatch):
    pipeline = Critiqued.from_config(config)
    assert pipeline.stages["critic"] is None and "critic" not in pipeline.describe()

    critiqued = pipeline.with_stages(config, critic=NoVerifier())
    assert type(critiqued) is Critiqued and critiqued.stages["selector"] is pipeline.stages["selector"]
    assert critiqued.describe()["critic"] == {"name": "none"}

    # Named in a config (its kind registered as any other): built with the others.
    monkeypatch.setitem(STAGES, "critic", {"accept": "cast.summarize.verify:NoVerifier"})
    built = Critiqued.from_config({**config, "critic": {"name": "accept"}})
    assert isinstance(built.stages["critic"], NoVerifier)
    assert list(built.describe())[-4:] == ["knowledge_base", "critic", "index", "history_responses"]


def test_a_pipeline_refuses_an_unknown_kind_and_a_missing_stage(config):
    pipeline = Pipeline.from_config(config)
    with pytest.raises(ConfigError, match="no stage kind.s. critic; kinds: ptkb, rewriter"):
        pipeline.with_stages(config, critic=NoVerifier())
    stages = {kind: stage for kind, stage in pipeline.stages.items() if kind != "linker"}
    with pytest.raises(ConfigError, match="a pipeline needs a stage of each kind: linker missing"):
        Pipeline(config=config, **stages)
