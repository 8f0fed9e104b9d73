"""cast.pyterrier: the pipeline's stages as PyTerrier transformers, on the six-passage fixture index. Composed with
`>>`, they give the rankings, rewrites, selections and answers of `cast run` with the same config; pt.Experiment
evaluates them beside PyTerrier's own transformers, with `cast eval`'s figures."""

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
from cast.core.pipeline import Pipeline
from cast.errors import CastError
from cast.evaluate.experiment import evaluate_runs
from cast.formats.runfile import ranked, read_run
from cast.formats.topics import load_topics

# The offline profile (HQE rewrites, the bi-encoder fused with LMD, EG over linked entities, extractive answers)
# cut to the six passages, with the collection's own entities.
QRELS = {"1_1": {"p1": 2}, "1_2": {"p4": 3}, "1_3": {"p2": 3}, "2_1": {"p3": 3}, "2_2": {"p6": 3}}


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
    assert (
        row["history"] == ("1_1", "1_2")
        and row["manual_rewrite"] == "What climate conference was held in Glasgow?"
    )


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
    qrels = pd.DataFrame(
        [(qid, docno, label) for qid, docs in QRELS.items() for docno, label in docs.items()],
        columns=["qid", "docno", "label"],
    )
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


def test_what_a_pyterrier_pipeline_cannot_walk_is_refused(sets, topics):
    pipeline = Pipeline.from_config(load_config("offline", [*sets, "history_responses=answers"]))
    with pytest.raises(CastError, match="history_responses: answers"):
        cpt.Rewriter(pipeline)(topics)
    with pytest.raises(CastError, match="earlier turn 1_1 is not in the frame"):
        cpt.Rewriter(Pipeline.from_config(load_config("offline", sets)))(topics[topics["qid"] != "1_1"])
    with pytest.raises(pt.validate.InputValidationError):
        cpt.Rewriter(pipeline)(topics[["qid", "query"]])  # no conversation columns


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
