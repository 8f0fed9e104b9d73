"""The stage contract, over every stage in the registry: each class states the name it is registered under and
implements its kind's one method (a class lacking it cannot be built), unknown settings are refused before
anything loads, and the batch form of a stage answers as the one-at-a-time form does (the stages that build
without models or an index here)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pytest

from cast.core.records import Passage, PastTurn, Rewrite, ScoredPassage, Selection, Turn
from cast.core.registry import STAGES, resources_for, stage_class
from cast.core.stages import Rewriter, SelectionInput, StageResources
from cast.errors import ConfigError
from cast.infra.resources import Resources

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


def test_the_registry_names_the_resources_that_start_what_stages_share():
    # The core names them without importing them (they start the JVM and the models): the name must resolve,
    # and what it names must keep the contract the core builds stages with.
    resources = resources_for({"device": "cpu"})
    assert type(resources) is Resources
    assert isinstance(resources, StageResources)
    assert resources.shared("key", lambda: [1]) is resources.shared("key", lambda: [2])


def test_resources_refuse_an_encoder_section_that_does_not_fit():
    with pytest.raises(ConfigError, match="encoder.quantize: int8 applies to backend onnx"):
        resources_for({"encoder": {"backend": "torch", "quantize": "int8"}}).check()


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


@pytest.mark.parametrize("kind, name", REGISTERED)
def test_every_setting_is_declared_with_a_type_and_a_doc_line(kind, name):
    from cast.core.settings import Setting

    settings = stage_class(kind, name).settings()
    for setting in settings.values():
        assert isinstance(setting, Setting)
        assert setting.type, f"{kind}.{setting.name} has no type"
        assert setting.doc, f"{kind}.{setting.name} has no line in the class docstring's Args:"
        if not setting.required:
            from cast.core.settings import check_value

            check_value(kind, setting, setting.default)  # a default meets its own limits


def test_a_setting_described_over_several_lines_keeps_the_whole_description():
    settings = stage_class("rewriter", "hqe").settings()
    assert settings["keyword_filter"].doc == (
        "``pos`` (nouns and adjectives, tagged with spaCy), ``stopwords`` (spaCy's stop list), or ``none`` "
        "(every word the index analyzer keeps)."
    )
    assert settings["spacy_model"].doc == (
        "the spaCy pipeline for ``pos`` (an installed package name or a folder)."
    )


def test_the_values_a_stage_was_built_with_are_recorded_and_read_only():
    from cast.infra.resources import Resources

    selector = stage_class("selector", "eg").from_config({"gamma": 0.5, "alpha": 0.85}, Resources({}))
    assert selector.setting_values["gamma"] == 0.5 and selector.setting_values["alpha"] == 0.85
    assert selector.describe()["gamma"] == 0.5 and selector.describe()["n"] == 3  # a default, recorded too
    with pytest.raises(TypeError):
        selector.setting_values["gamma"] = 1.0  # type: ignore[index]
    with pytest.raises(ConfigError, match=r"^selector.gamma must be in \[0, 1\], got 2$"):
        stage_class("selector", "eg")(gamma=2)  # direct construction is checked as a config is


def test_a_run_resumes_across_runtime_settings_but_not_across_others():
    from cast.formats.outputs import resume_conflict

    reranker = {"name": "biencoder", "batch_size": 64, "with_title": True, "depth": 100}
    record = {"qid": "1_1", "utterance": "u", "config": {"reranker": reranker}}
    done, utterances = {"1_1": record}, {"1_1": "u"}
    assert resume_conflict(done, utterances, {"reranker": {**reranker, "batch_size": 8}}) is None
    conflict = resume_conflict(done, utterances, {"reranker": {**reranker, "with_title": False}})
    assert conflict is not None and "reranker.with_title: True -> False" in conflict


def test_cast_stages_lists_every_stage_with_its_declared_settings(capsys):
    from cast.cli import main

    assert main(["stages"]) == 0
    out = capsys.readouterr().out
    for kind, name in REGISTERED:
        assert f"\n{kind} {name}: " in f"\n{out}"
    assert main(["stages", "selector", "eg"]) == 0
    eg = capsys.readouterr().out
    assert "  gamma: float = 0.25 (in [0, 1])\n      the query's weight" in eg
    assert "  alpha: float = 0.99 (in (0, 1))" in eg
    assert main(["stages", "reranker", "biencoder"]) == 0
    assert "  batch_size: int = 64 (runtime)" in capsys.readouterr().out
    assert main(["stages", "selecter"]) == 1
    assert "unknown stage kind 'selecter'" in capsys.readouterr().err
