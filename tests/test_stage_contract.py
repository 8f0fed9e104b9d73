"""The stage contract, over every stage in the registry: each class states the name it is registered under and
implements its kind's one method (a class lacking it cannot be built), unknown settings are refused before
anything loads, and the batch form of a stage answers as the one-at-a-time form does (the stages that build
without models or an index here)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pytest

from cast.errors import ConfigError
from cast.records import Passage, PastTurn, Rewrite, ScoredPassage, Selection, Turn
from cast.registry import STAGES, stage_class
from cast.stages import Rewriter, SelectionInput

REGISTERED = [(kind, name) for kind, names in STAGES.items() for name in names]


@pytest.mark.parametrize("kind, name", REGISTERED)
def test_a_registered_stage_states_its_name_and_implements_its_method(kind, name):
    cls = stage_class(kind, name)
    assert cls.name == name
    assert cls.kind == kind
    assert not inspect.isabstract(cls), f"{cls.__name__} lacks {sorted(cls.__abstractmethods__)}"


@pytest.mark.parametrize("kind, name", REGISTERED)
def test_an_unknown_setting_is_refused_before_anything_is_built(kind, name):
    with pytest.raises(ConfigError, match="no_such_setting"):
        stage_class(kind, name).check_params({"no_such_setting": 1})


def test_a_stage_without_its_method_cannot_be_built():
    class Incomplete(Rewriter):
        name = "incomplete"

    with pytest.raises(TypeError, match="rewrite"):
        Incomplete()


TURNS = [
    Turn(
        qid=f"1_{n}",
        topic_id="1",
        turn_id=str(n),
        utterance=f"what about item {n}?",
        manual_rewrite=f"item {n}",
    )
    for n in range(1, 4)
]


@pytest.mark.parametrize("name", ["raw", "manual"])
def test_rewriters_batch_as_one_at_a_time(name):
    rewriter = stage_class("rewriter", name)()
    history: Sequence[PastTurn] = [PastTurn(TURNS[0], "item 1")]
    items = [(history, turn) for turn in TURNS]
    batch: list[Rewrite] = rewriter.rewrite_batch(items)
    assert batch == [rewriter.rewrite(h, t) for h, t in items]


def test_the_original_order_selector_and_top_k_summarizer_batch_as_one_at_a_time():
    candidates = tuple(
        ScoredPassage(Passage(f"p{k}", f"Passage {k} says something about item {k}. " * 3), 1.0 - k / 10)
        for k in range(5)
    )
    selector = stage_class("selector", "o")()
    selections: list[Selection] = [
        selector.select(SelectionInput(query=f"q{n}", candidates=candidates)) for n in range(2)
    ]
    summarizer = stage_class("summarizer", "topk_trim")()
    items = [(f"q{n}", s) for n, s in enumerate(selections)]
    assert summarizer.summarize_batch(items) == [summarizer.summarize(q, s) for q, s in items]
