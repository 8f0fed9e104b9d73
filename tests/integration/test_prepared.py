"""Turns prepared as far as re-ranking or linking, finished later under other settings (cast/conversation/prepared.py)."""

import json

import pytest

from cast.conversation.prepared import Prepared
from cast.conversation.walker import answer_conversations, prepare_conversations
from cast.core.config import load_config
from cast.core.pipeline import Pipeline
from cast.core.registry import build_stage
from cast.errors import ConfigError
from cast.formats.topics import load_topics
from cast.infra.resources import Resources


def eg_config(index, core_entities, *overrides):
    return load_config(
        "offline",
        [
            f"index={index}",
            "rewriter.name=manual",
            "reranker.name=none",
            "linker.name=dictionary",
            "linker.mentions=all",
            f"linker.entities_dir={core_entities}",
            "knowledge_base.name=collection",
            f"knowledge_base.entities_dir={core_entities}",
            "selector.name=eg",
            "selector.gamma=0.5",
            "selector.candidates=4",
            "selector.n=2",
            "summarizer.name=topk_trim",
            "summarizer.words=12",
            *overrides,
        ],
    )


@pytest.fixture(scope="module")
def conversations(fixtures):
    return load_topics(fixtures / "core" / "conversations.json")


@pytest.fixture(scope="module")
def pipeline(core_index, core_entities):
    return Pipeline.from_config(eg_config(core_index, core_entities))


def records(results):
    """What a run writes of each turn, less its timings."""
    return [{k: v for k, v in r.to_record().items() if k != "timings"} for r in results]


@pytest.mark.parametrize("stop_after", ["rerank", "link"])
def test_finishing_prepared_turns_gives_what_a_whole_run_gives(pipeline, conversations, stop_after):
    whole = answer_conversations(pipeline, conversations)
    prepared = prepare_conversations(pipeline, conversations, stop_after=stop_after)
    assert all((t.links is not None) == (stop_after == "link") for t in prepared.turns.values())
    finished = answer_conversations(pipeline, conversations, prepared=prepared)
    assert records(finished) == records(whole)
    assert [r.ranking for r in finished] == [r.ranking for r in whole]
    assert any(r.query_entities for r in finished)  # the selector saw core_entities


def test_other_later_settings_finish_the_same_prepared_turns(
    pipeline, conversations, core_index, core_entities
):
    prepared = prepare_conversations(pipeline, conversations, stop_after="link")
    config = eg_config(core_index, core_entities, "selector.gamma=1.0", "summarizer.words=8")
    later = {kind: build_stage(kind, config[kind], Resources(config)) for kind in ("selector", "summarizer")}
    swept = answer_conversations(pipeline.with_stages(config, **later), conversations, prepared=prepared)
    assert records(swept) == records(answer_conversations(Pipeline.from_config(config), conversations))
    assert all(len(r.answer.text.split()) <= 8 for r in swept)


def test_prepared_turns_survive_a_save_and_a_load(pipeline, conversations, tmp_path):
    prepared = prepare_conversations(pipeline, conversations, stop_after="link")
    path = prepared.compact(pipeline.candidates).save(tmp_path / "prepared.jsonl.gz")
    loaded = Prepared.load(path)
    assert loaded.description == prepared.description and loaded.stop_after == "link"
    assert loaded.turns == prepared.compact(pipeline.candidates).turns
    tail = next(iter(loaded.turns.values())).ranking[pipeline.candidates :]
    assert all(p.passage.text == "" for p in tail)  # below the head: ids and scores, as a run file
    assert records(answer_conversations(pipeline, conversations, prepared=loaded)) == records(
        answer_conversations(pipeline, conversations)
    )


def test_a_pipeline_with_other_early_stages_refuses_the_prepared_turns(
    pipeline, conversations, core_index, core_entities
):
    prepared = prepare_conversations(pipeline, conversations[:1], stop_after="link")
    other = Pipeline.from_config(eg_config(core_index, core_entities, "first_stage.mu=500"))
    with pytest.raises(ConfigError, match=r"another first_stage .*\"mu\": 1000.*\"mu\": 500"):
        answer_conversations(other, conversations[:1], prepared=prepared)
    fewer = Pipeline.from_config(eg_config(core_index, core_entities, "selector.candidates=3"))
    with pytest.raises(ConfigError, match="another candidates"):  # the links cover 4 candidates, not 3
        answer_conversations(fewer, conversations[:1], prepared=prepared)
    # Prepared only as far as re-ranking, the candidates are linked when finishing: any number will do.
    answer_conversations(
        fewer, conversations[:1], prepared=prepare_conversations(pipeline, conversations[:1])
    )


def test_turns_missing_from_the_prepared_ones_are_named(pipeline, conversations):
    prepared = prepare_conversations(pipeline, conversations[:1])
    with pytest.raises(ConfigError, match=r"were not prepared \(e\.g\. 2_1\)"):
        answer_conversations(pipeline, conversations, prepared=prepared)


def test_turns_cannot_be_prepared_when_the_answers_are_the_responses(
    core_index, core_entities, conversations
):
    answers = Pipeline.from_config(eg_config(core_index, core_entities, "history_responses=answers"))
    with pytest.raises(ConfigError, match="history_responses: answers"):
        prepare_conversations(answers, conversations)


def test_a_pass_stops_only_where_later_turns_need_nothing_after_it(pipeline, conversations):
    # A later turn's rewrite reads an earlier turn's top passage, but nothing of its selection or answer.
    with pytest.raises(ConfigError, match="stops after one of rerank, link, not 'select'"):
        prepare_conversations(pipeline, conversations, stop_after="select")


def test_cast_run_stops_after_linking_and_finishes_under_another_selector(
    core_index, core_entities, fixtures, tmp_path, capsys
):
    from cast.cli import main

    topics = fixtures / "core" / "conversations.json"
    sets = [
        "--set", "rewriter.name=manual", "--set", "reranker.name=none",
        "--set", "linker.name=dictionary", "--set", "linker.mentions=all", "--set", f"linker.entities_dir={core_entities}",
        "--set", "knowledge_base.name=collection", "--set", f"knowledge_base.entities_dir={core_entities}",
        "--set", "selector.name=eg", "--set", "summarizer.name=topk_trim",
    ]  # fmt: skip
    common = ["run", "--index", str(core_index), "--topics", str(topics), *sets]
    prepared = tmp_path / "prepared.jsonl.gz"
    assert main([*common, "--stop-after", "link", "--prepared", str(prepared)]) == 0
    assert prepared.is_file() and not list(tmp_path.glob("*.run"))
    assert (
        main(
            [
                *common,
                "--set",
                "selector.gamma=1.0",
                "--prepared",
                str(prepared),
                "--output",
                str(tmp_path / "a"),
            ]
        )
        == 0
    )
    assert main([*common, "--set", "selector.gamma=1.0", "--output", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a.run").read_text() == (tmp_path / "b.run").read_text()
    answers = [
        [
            {k: v for k, v in json.loads(line).items() if k != "timings"}
            for line in (tmp_path / f"{n}.answers.jsonl").open()
        ]
        for n in "ab"
    ]
    assert answers[0] == answers[1]
    capsys.readouterr()
    other = ["--set", "first_stage.mu=10", "--prepared", str(prepared), "--output", str(tmp_path / "c")]
    assert main([*common, *other]) != 0
    assert "the prepared turns were made with another first_stage" in capsys.readouterr().err
    assert not list(tmp_path.glob("c.*"))
    assert main([*common, "--stop-after", "rerank"]) != 0
    assert "--stop-after needs --prepared FILE" in capsys.readouterr().err
