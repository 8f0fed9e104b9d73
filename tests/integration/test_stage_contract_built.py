"""The stage contract on built stages: describe records every setting of each stage that builds here (models
included) and of the stages that need files (the fixture index and entity files)."""

from __future__ import annotations

import pytest
from test_stage_contract import REGISTERED

from cast.core.registry import stage_class


def _built(kind: str, name: str):
    """The stage built from its defaults, where that needs no model, index file or service here."""
    from cast.errors import CastError
    from cast.infra.resources import Resources

    try:
        return stage_class(kind, name).from_config({}, Resources({}))
    except (CastError, ImportError, OSError, TypeError) as e:
        pytest.skip(f"{kind} {name} does not build from its defaults here: {type(e).__name__}")


@pytest.mark.parametrize("kind, name", REGISTERED)
def test_describe_records_every_setting_of_a_built_stage(kind, name):
    stage = _built(kind, name)
    described = stage.describe()
    assert described["name"] == name
    assert set(stage.settings()) <= set(described), set(stage.settings()) - set(described)
    assert dict(stage.setting_values) == {k: v.default for k, v in stage.settings().items()}


@pytest.fixture(scope="module")
def resources_here(core_index, core_entities, tmp_path_factory):
    """What the stages that need an index, entity files or models are built from: the fixture corpus's index and
    entity files, a link graph and tiny random models."""
    import tiny_models

    from cast.infra.resources import Resources

    folder = tmp_path_factory.mktemp("contract")
    entities = core_entities
    graph = folder / "links.tsv"
    graph.write_text("Glasgow\tRiver_Clyde\nCOP26\tGlasgow\n")
    t5 = tiny_models.seq2seq(folder / "t5", "t5")
    classifier = tiny_models.bert_classifier(folder / "bert")
    sections = {
        ("rewriter", "hqe"): {},
        ("rewriter", "t5"): {"model": str(t5)},
        ("ptkb", "cross_encoder"): {"model": str(classifier)},
        ("reranker", "monobert"): {"model": str(classifier)},
        ("reranker", "cross_encoder"): {"model": str(classifier)},
        ("linker", "dictionary"): {"entities_dir": str(entities)},
        ("knowledge_base", "collection"): {"entities_dir": str(entities)},
        ("knowledge_base", "link_graph"): {"path": str(graph)},
        ("summarizer", "seq2seq"): {"model": str(t5), "max_input_tokens": 64},
    }
    return Resources({"index": str(core_index), "device": "cpu"}), sections


@pytest.mark.parametrize(
    "kind, name",
    [
        ("rewriter", "hqe"),
        ("rewriter", "t5"),
        ("ptkb", "cross_encoder"),
        ("reranker", "monobert"),
        ("reranker", "cross_encoder"),
        ("linker", "dictionary"),
        ("knowledge_base", "collection"),
        ("knowledge_base", "link_graph"),
        ("summarizer", "seq2seq"),
    ],
)
def test_describe_records_every_setting_of_the_stages_that_need_files(resources_here, kind, name):
    resources, sections = resources_here
    stage = stage_class(kind, name).from_config(sections[(kind, name)], resources)
    described = stage.describe()
    assert set(stage.settings()) <= set(described), set(stage.settings()) - set(described)
