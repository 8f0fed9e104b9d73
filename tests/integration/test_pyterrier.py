"""cast.pyterrier: the pipeline's stages as PyTerrier transformers, on the six-passage fixture index. Built from a
config or alone by name and composed with `>>`, they give the rankings, rewrites, selections and answers of
`cast run` with the same settings; pt.Experiment evaluates them beside PyTerrier's own transformers, with
`cast eval`'s figures, in batches too; `.search()` answers a follow-up question given its history."""

from __future__ import annotations

import json

import pandas as pd
import pyterrier as pt
import pytest
from fast_pipeline import cli_sets
from ir_measures import RR, nDCG

from cast import pyterrier as cpt
from cast.cli import main as cast_main
from cast.core.config import load_config
from cast.core.pipeline import COMPOSITION, Pipeline
from cast.errors import CastError, ConfigError
from cast.evaluate.experiment import evaluate_runs
from cast.formats.answer_frames import write_answer_file
from cast.formats.rag_runs import read_rag24_run
from cast.formats.runfile import ranked, read_run
from cast.formats.topics import load_topics

# The offline profile (HQE rewrites, the bi-encoder fused with LMD, EG over linked entities, extractive answers)
# cut to the six passages, with the collection's own entities.
QRELS = {"1_1": {"p1": 2}, "1_2": {"p4": 3}, "1_3": {"p2": 3}, "2_1": {"p3": 3}, "2_2": {"p6": 3}}


def qrels_frame() -> pd.DataFrame:
    return pd.DataFrame(
        [(qid, docno, label) for qid, docs in QRELS.items() for docno, label in docs.items()],
        columns=["qid", "docno", "label"],
    )


@pytest.fixture(scope="module")
def sets(core_index, core_entities, tmp_path_factory):
    return [
        f"index={core_index}",
        f"cache_dir={tmp_path_factory.mktemp('cache')}",
        *(
            "rewriter.name=hqe",
            "rewriter.r_topic=1.0",
            "rewriter.r_sub=0.5",
            "rewriter.eta=1.2",
        ),  # HQE's thresholds for six passages
        "encoder.backend=torch",
        "encoder.quantize=none",
        "linker.name=dictionary",
        "linker.mentions=all",
        f"linker.entities_dir={core_entities}",
        f"knowledge_base.entities_dir={core_entities}",
        "selector.candidates=4",
        "selector.n=2",
        "summarizer.words=20",
    ]


@pytest.fixture(scope="module")
def cast_run(sets, fixtures, tmp_path_factory):
    """`cast run`'s outputs: {qid: [(docno, score)]} and {qid: answers record}."""
    output = tmp_path_factory.mktemp("run") / "offline"
    topics = fixtures / "core" / "conversations.json"
    assert cast_main(["run", "--topics", str(topics), "--output", str(output), *cli_sets(*sets)]) == 0
    records = [json.loads(line) for line in output.with_suffix(".answers.jsonl").read_text().splitlines()]
    rankings = {qid: ranked(scores.items()) for qid, scores in read_run(output.with_suffix(".run")).items()}
    return rankings, {r["qid"]: r for r in records}, output.with_suffix(".run")


@pytest.fixture(scope="module")
def stages(sets):
    return cpt.transformers(Pipeline.from_config(load_config("offline", sets)))


@pytest.fixture(scope="module")
def topics(fixtures):
    return cpt.topics(str(fixtures / "core" / "conversations.json"))


def test_the_topics_frame_carries_each_turns_conversation(topics):
    assert list(topics["qid"]) == ["1_1", "1_2", "1_3", "2_1", "2_2"]
    row = topics.set_index("qid").loc["1_3"]
    assert row["query"] == row["utterance"] == "What conference was held there?"
    assert row["manual_rewrite"] == "What climate conference was held in Glasgow?"
    # Each row carries its earlier turns whole: a batch of rows needs no other row.
    assert [(t["qid"], t["utterance"], t["manual_rewrite"]) for t in row["history"]] == [
        ("1_1", "Tell me about Glasgow.", "Tell me about Glasgow."),
        ("1_2", "Which river flows through it?", "Which river flows through Glasgow?"),
    ]


def test_the_transformers_follow_the_pipelines_composition(stages):
    assert [step.kind for step in cpt.STEPS] == [
        "rewriter",
        "first_stage",
        "reranker",
        "selector",
        "summarizer",
    ]
    # Each slot is a transformer's own or carried by one (the rewriter's PTKB selector), once.
    held = [kind for step in cpt.STEPS for kind in (step.kind, *step.carries)]
    assert sorted(held) == sorted(slot.kind for slot in COMPOSITION)
    assert [type(step) for step in stages] == list(cpt.STEPS)


def test_a_pyterrier_pipeline_equals_cast_run(stages, topics, cast_run):
    rankings, records, _ = cast_run
    rewritten = stages.rewriter(topics)
    assert list(rewritten["query"]) == [records[qid]["query"] for qid in topics["qid"]]
    assert list(rewritten["query_0"]) == list(topics["query"])
    assert any(
        q != u for q, u in zip(rewritten["query"], topics["utterance"], strict=True)
    )  # HQE read the history

    ranking = (stages.rewriter >> stages.retriever >> stages.reranker)(topics)
    for qid, group in ranking.groupby("qid"):
        group = group.sort_values("rank")
        # The model's scores, rank from them: here (six passages, all re-ranked) the run file's too.
        assert list(group["rank"]) == list(range(len(group)))
        assert list(group["score"]) == sorted(group["score"], reverse=True)
        assert (
            list(zip(group["docno"], group["score"].map(lambda s: float(f"{s:.6f}")), strict=True))
            == rankings[qid]
        )
    assert set(ranking["qid"]) == set(rankings)

    full = stages.rewriter >> stages.retriever >> stages.reranker >> stages.selector >> stages.answerer
    answers = full(topics).set_index("qid")
    assert list(answers.index) == list(topics["qid"])
    for qid, record in records.items():
        assert answers.loc[qid, "qanswer"] == record["answer"]["text"]
        answer = answers.loc[qid, "answer"]
        assert [[s.text, s.passage_id] for s in answer.sentences] == [
            [s["text"], s["passage_id"]] for s in record["answer"]["sentences"]
        ]
        assert list(answer.source_ids) == record["answer"]["source_ids"]
    selected = (stages.rewriter >> stages.retriever >> stages.reranker >> stages.selector)(topics)
    for qid, group in selected.groupby("qid"):
        assert list(group.sort_values("rank")["docno"]) == [
            p["passage"]["id"] for p in records[qid]["selection"]["passages"]
        ]
        assert group["selection"].iloc[0].method == "eg"


def test_pt_experiment_evaluates_our_stages_beside_pyterriers(stages, topics, cast_run):
    _, _, run_path = cast_run
    qrels = qrels_frame()
    longest_first = pt.apply.doc_score(lambda row: len(row["text"]))  # a PyTerrier re-ranker in our pipeline
    table = pt.Experiment(
        [
            stages.rewriter >> stages.retriever,
            stages.rewriter >> stages.retriever >> stages.reranker,
            stages.rewriter >> stages.retriever >> longest_first,
            stages.rewriter >> stages.retriever % 2,
        ],
        topics,
        qrels,
        [nDCG @ 3, RR],
        names=["lmd", "biencoder", "longest", "lmd top 2"],
        plan="tree",
    ).set_index("name")
    qrels_path = run_path.with_suffix(".qrels")
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    ours = evaluate_runs([run_path], qrels_path)["offline"].per_turn.mean()
    assert table.loc["biencoder", "nDCG@3"] == pytest.approx(ours["nDCG@3"])
    assert table.loc["biencoder", "RR"] == pytest.approx(ours["MRR"])
    assert len(set(table["nDCG@3"])) > 1  # the systems differ


def test_a_pyterrier_ranking_feeds_our_reranker_selector_and_answerer(stages, topics):
    """Any result frame with text (here a fixed one, as a PyTerrier retriever gives) goes through our later stages."""
    rewritten = stages.rewriter(topics)
    passages = {
        "p1": "Glasgow is the largest city in Scotland, on the River Clyde.",
        "p4": "The River Clyde flows.",
    }
    fixed = pd.DataFrame(
        [
            {**row, "docno": docno, "text": text, "score": float(2 - i)}
            for row in rewritten.to_dict("records")
            for i, (docno, text) in enumerate(passages.items())
        ]
    )
    answers = (pt.Transformer.from_df(fixed) >> stages.reranker >> stages.selector >> stages.answerer)(
        rewritten
    )
    assert len(answers) == len(topics) and all(answers["qanswer"].str.len() > 0)
    assert {s for a in answers["answer"] for s in a.source_ids} <= set(passages)


def test_what_a_pyterrier_pipeline_cannot_walk_is_refused(sets, stages, topics):
    pipeline = Pipeline.from_config(load_config("offline", [*sets, "history_responses=answers"]))
    with pytest.raises(CastError, match="history_responses: answers"):
        cpt.transformers(pipeline).rewriter(topics)
    ranking = (stages.rewriter >> stages.retriever)(topics[topics["qid"] != "1_1"])
    assert "1_2" in set(ranking["qid"])  # the rewriter reads 1_1 from 1_2's history
    with pytest.raises(CastError, match="earlier turn 1_1 is not in the frame: a selector reads"):
        stages.selector(ranking)
    with pytest.raises(CastError, match="history entry 3 of turn q"):
        stages.rewriter(pd.DataFrame([{"qid": "q", "query": "Why?", "history": (3,)}]))
    with pytest.raises(pt.validate.InputValidationError):
        stages.rewriter(topics[["qid"]])  # no query


def test_topics_and_qrels_of_irds_ids_or_files(monkeypatch, fixtures):
    conversations = load_topics(fixtures / "core" / "conversations.json")
    monkeypatch.setattr("cast.formats.topics.read_irds_topics", lambda source: conversations)
    monkeypatch.setattr("cast.formats.topics.read_irds_qrels", lambda source: QRELS)
    assert cpt.topics("irds:trec-cast/v1/2019").equals(cpt.topics_frame(conversations))
    assert cpt.qrels("irds:trec-cast/v1/2019").to_dict("records")[:2] == [
        {"qid": "1_1", "docno": "p1", "label": 2},
        {"qid": "1_2", "docno": "p4", "label": 3},
    ]
    assert list(cpt.topics_frame([]).columns) == ["qid", "query", *cpt.CONTEXT_COLUMNS]


@pytest.fixture(scope="module")
def shared(core_index, tmp_path_factory):
    """What the stages built alone share: the fixture index, a cache, the encoder as the config's sets run it."""
    return {
        "index": str(core_index),
        "cache_dir": str(tmp_path_factory.mktemp("alone")),
        "encoder": {"backend": "torch", "quantize": "none"},
    }


@pytest.fixture(scope="module")
def answering(shared):
    """A script's pipeline, without a config: the offline profile's stages by name, with the settings `sets` gives."""
    return (
        cpt.Rewriter("hqe", r_topic=1.0, r_sub=0.5, eta=1.2, **shared)
        >> cpt.Retriever(mu=1000, **shared) % 100
        >> cpt.ReRanker("biencoder", first_stage_weight=0.2, **shared)
        >> cpt.Answerer("entity_extractive", words=20, **shared)
    )


def test_a_script_without_a_config_runs_in_batches_and_answers_a_follow_up(answering, shared, stages, topics):
    whole = answering(topics)
    batched = pd.concat(list(answering.transform_gen(topics, batch_size=2)))  # as pt.Experiment's batch_size
    assert list(batched["qid"]) == list(whole["qid"]) == list(topics["qid"])
    assert list(batched["qanswer"]) == list(whole["qanswer"])
    # The stages built alone rank as the config's.
    ranking = answering[:4]  # the rewriter, the retriever, its cut at 100, the re-ranker
    assert isinstance(ranking, cpt.ConversationPipeline) and isinstance(ranking[3], cpt.ReRanker)
    alone = ranking(topics)
    configured = (stages.rewriter >> stages.retriever >> stages.reranker)(topics)
    assert list(alone["docno"]) == list(configured["docno"])
    assert list(alone["score"]) == pytest.approx(list(configured["score"]))

    table = pt.Experiment(
        [answering[:2], ranking],
        topics,
        qrels_frame(),
        [nDCG @ 3, RR],
        names=["lmd", "biencoder"],
        batch_size=2,
    ).set_index("name")
    unbatched = pt.Experiment(
        [answering[:2], ranking], topics, qrels_frame(), [nDCG @ 3, RR], names=["lmd", "biencoder"]
    ).set_index("name")
    assert table.to_dict() == unbatched.to_dict()

    follow_up = answering.search("Which river flows through it?", history=["Tell me about Glasgow."])
    (row,) = follow_up.to_dict("records")
    assert "glasgow" in row["query"].lower() and row["query_0"] == "Which river flows through it?"
    assert "River Clyde" in row["qanswer"] and row["answer"].source_ids[0] == "p4"
    # Without its history the rewrite cannot know the city; with a response the rewriter reads that too.
    assert "glasgow" not in answering[:1].search("Which river flows through it?")["query"].iloc[0].lower()
    reads_responses = cpt.Rewriter("hqe", r_topic=1.0, r_sub=0.5, eta=1.2, response_keywords=3, **shared)
    history = [("Tell me about it.", "Glasgow is the largest city in Scotland.")]
    told = reads_responses.search("Which river flows through it?", history=history)
    assert "glasgow" in told["query"].iloc[0].lower()


def test_stages_built_alone_share_what_they_load_and_check_their_settings(
    shared, core_entities, stages, topics
):
    assert cpt.ReRanker("biencoder", first_stage_weight=0.2, **shared).stage is (
        cpt.ReRanker("biencoder", first_stage_weight=0.2, **shared).stage
    )
    assert cpt.resources(**shared) is cpt.resources(**shared)
    with pytest.raises(ConfigError, match=r"reranker.first_stage_weight must be in \[0, 1\], got 2"):
        cpt.ReRanker("biencoder", first_stage_weight=2, **shared)
    with pytest.raises(ConfigError, match="first_stage lmd: unknown setting.s. m; allowed: .*mu"):
        cpt.Retriever(m=1000, **shared)
    with pytest.raises(ConfigError, match="selector eg reads entities: give linker="):
        cpt.Selector("eg", **shared)

    # The linker and selector, and the answerer after them, as the config's.
    entities = {"entities_dir": str(core_entities)}
    selector = cpt.Selector(
        "eg",
        linker={"name": "dictionary", "mentions": "all", **entities},
        knowledge_base={"name": "collection", **entities},
        candidates=4,
        n=2,
        **shared,
    )
    ranked = (stages.rewriter >> stages.retriever >> stages.reranker)(topics)
    answers = (selector >> cpt.Answerer("entity_extractive", words=20, **shared))(ranked)
    expected = (stages.selector >> stages.answerer)(ranked)
    assert list(answers["qanswer"]) == list(expected["qanswer"])
    assert list(selector(ranked)["docno"]) == list(stages.selector(ranked)["docno"])


def test_an_answerers_frame_is_written_as_a_trec_rag24_file(answering, topics, tmp_path):
    ranking = answering[:4](topics)
    answers = (pt.Transformer.from_df(ranking) >> answering[4])(topics)
    path = tmp_path / "alone.trec-rag24.jsonl"
    assert write_answer_file(answers, path, "trec-rag24", run_id="alone", results=ranking) == []
    lines = read_rag24_run(path)
    assert [line["topic_id"] for line in lines] == list(topics["qid"])
    assert [line["topic"] for line in lines] == list(topics["utterance"])
    assert lines[0]["references"] == list(ranking[ranking["qid"] == "1_1"].sort_values("rank")["docno"])


def test_an_ikat_rewriters_ptkb_choice_reaches_the_answerers_frame(answering, shared, fixtures):
    # What the iKAT 2025 answer file's PTKB provenance is written from (tests/unit/test_answer_frames.py).
    topics = cpt.topics(str(fixtures / "ikat" / "2025_test_topics.json"))
    personal = cpt.Rewriter("raw", ptkb={"name": "bm25", "k": 2}, **shared)
    rewritten = personal(topics)
    chosen = dict(zip(rewritten["qid"], rewritten["ptkb_selection"], strict=True))
    assert all(0 < len(selection.statements) <= 2 for selection in chosen.values())
    answers = answering[1:](rewritten)
    assert not answers.empty  # the turns the six-passage index has passages for
    assert all(row.ptkb_selection == chosen[row.qid] for row in answers.itertuples())
