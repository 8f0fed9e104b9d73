"""The pipeline end to end on the six-passage fixture index, with the baseline stages."""

import json
from collections.abc import Sequence
from dataclasses import replace

import pytest
from test_pipeline_without_index import baseline_config, conversations

from cast.conversation.walker import answer_conversations
from cast.core.pipeline import Pipeline
from cast.core.records import Conversation, Rewrite, Turn
from cast.core.stages import Rewriter, Summarizer
from cast.errors import ConfigError, EmptyUtteranceError
from cast.formats.outputs import RunOutputs


@pytest.fixture(scope="module")
def pipeline(core_index):
    return Pipeline.from_config(baseline_config(core_index))


def test_answers_every_turn_in_lock_step_with_history(pipeline):
    seen_history = {}
    original = pipeline.rewriter.rewrite_batch

    def spy(items):
        for history, turn in items:
            seen_history[turn.qid] = [p.turn.qid for p in history]
        return original(items)

    pipeline.rewriter.rewrite_batch = spy
    try:
        results = answer_conversations(pipeline, conversations())
    finally:
        pipeline.rewriter.rewrite_batch = original
    assert [r.qid for r in results] == ["1_1", "2_1", "1_2", "2_2", "1_3"]
    assert seen_history["1_3"] == ["1_1", "1_2"]
    assert seen_history["2_2"] == ["2_1"]
    by_qid = {r.qid: r for r in results}
    assert by_qid["1_2"].ranking[0].id == "p4"  # River Clyde
    assert by_qid["1_3"].ranking[0].id == "p2"  # COP26
    assert by_qid["2_2"].ranking[0].id == "p6"  # Paris Agreement
    answer = by_qid["1_3"].answer
    assert answer.source_ids == tuple(p.id for p in by_qid["1_3"].selection.passages)
    assert len(answer.text.split()) == 12
    assert answer.text.startswith("The COP26 climate change conference")
    assert set(by_qid["1_1"].timings) == {"rewrite", "first_stage", "rerank", "select", "summarize", "other"}


def test_shared_qids_are_answered_once(pipeline):
    first = conversations()[0]
    branch = Conversation("1", first.turns[:2])
    results = answer_conversations(pipeline, [first, branch])
    assert [r.qid for r in results] == ["1_1", "1_2", "1_3"]


def test_empty_query_is_reported(pipeline):
    turn = Turn(qid="9_1", topic_id="9", turn_id="1", utterance="  ", manual_rewrite="  ")
    with pytest.raises(EmptyUtteranceError, match="9_1"):
        pipeline.answer_turn([], turn)


def test_a_turn_without_the_rewrite_the_rewriter_reads_stops_the_run_before_any_turn(pipeline):
    first, second = conversations()
    lacking = Turn(qid="2_9", topic_id="2", turn_id="9", utterance="And then?")
    answered = []
    with pytest.raises(ConfigError, match="turn 2_9 has no manual rewrite"):
        answer_conversations(
            pipeline, [first, replace(second, turns=(*second.turns, lacking))], on_result=answered.append
        )
    assert answered == []


class HistoryRecordingRewriter(Rewriter):
    """The manual rewrite, noting the responses of the earlier turns it is shown."""

    name = "recording"

    def __init__(self):
        self.responses: dict[str, list[str | None]] = {}

    def rewrite(self, history, turn):
        self.responses[turn.qid] = [past.turn.response for past in history]
        return Rewrite(turn.manual_rewrite, self.name)


@pytest.mark.parametrize("history_responses", ["topics", "answers"])
def test_earlier_responses_are_the_topics_or_the_pipelines_own_answers(pipeline, history_responses):
    convs = conversations()
    first, *later = convs[0].turns
    convs[0] = replace(convs[0], turns=(replace(first, response="The canonical response."), *later))
    recording = HistoryRecordingRewriter()
    stages = dict(pipeline.stages)
    own = Pipeline(**{**stages, "rewriter": recording}, config={"history_responses": history_responses})
    results = {r.qid: r for r in answer_conversations(own, convs)}
    expected = "The canonical response." if history_responses == "topics" else results["1_1"].answer.text
    assert recording.responses["1_2"] == [expected]
    assert own.describe()["history_responses"] == history_responses

    # A resumed run sees the same: the answers come from the interrupted run's records.
    done = {"1_1": results["1_1"].to_record()}
    answer_conversations(own, convs, done=done)
    assert recording.responses["1_2"] == [expected]


def test_the_answer_generator_answers_the_rewrites_question_and_retrieval_uses_its_query(
    pipeline, monkeypatch
):
    class KeywordsAndQuestion(Rewriter):
        name = "keywords"

        def rewrite(self, history, turn):
            return Rewrite(f"glasgow {turn.manual_rewrite}", self.name, question=turn.utterance)

    class RecordingSummarizer(Summarizer):
        name = "recording"

        def __init__(self, inner):
            self.inner, self.questions = inner, []

        def summarize(self, query, selection, earlier=()):
            self.questions.append(query)
            return self.inner.summarize(query, selection, earlier)

    summarizer = RecordingSummarizer(pipeline.summarizer)
    stages = dict(pipeline.stages)
    own = Pipeline(**{**stages, "rewriter": KeywordsAndQuestion(), "summarizer": summarizer})
    turn = conversations()[0].turns[1]
    reranked_with = []
    original = pipeline.reranker.rerank_batch

    def spy(items, *, questions=None):
        reranked_with.append(([query for query, _ in items], questions))
        return original(items, questions=questions)

    monkeypatch.setattr(pipeline.reranker, "rerank_batch", spy)
    result = own.answer_turn([], turn)
    assert summarizer.questions == [turn.utterance]
    # The re-ranker is given the question beside the query (the bi-encoder's question_weight reads it).
    assert reranked_with == [([f"glasgow {turn.manual_rewrite}"], [turn.utterance])]
    assert result.rewrite.query == f"glasgow {turn.manual_rewrite}"
    assert result.to_record()["rewrite"]["question"] == turn.utterance


def test_history_responses_must_be_topics_or_answers(pipeline):
    stages = dict(pipeline.stages)
    with pytest.raises(ConfigError, match="history_responses must be one of topics, answers, got 'own'"):
        Pipeline(**stages, config={"history_responses": "own"})


def _run_to(outputs, pipe, convs, fail_after=None):
    written = []

    def write(result):
        if fail_after is not None and len(written) == fail_after:
            raise KeyboardInterrupt
        outputs.append(result.qid, result.ranking, result.to_record())
        written.append(result.qid)

    answer_conversations(pipe, convs, done=outputs.completed(), on_result=write)
    outputs.finalize([t.qid for c in convs for t in c.turns])
    return written


def test_interrupted_run_resumes_and_matches_an_uninterrupted_one(pipeline, tmp_path):
    convs = conversations()
    _run_to(RunOutputs(tmp_path / "full", "t"), pipeline, convs)

    outputs = RunOutputs(tmp_path / "resumed", "t")
    with pytest.raises(KeyboardInterrupt):
        _run_to(outputs, pipeline, convs, fail_after=3)
    assert not outputs.run_path.exists() and not outputs.answers_path.exists()
    # A record cut short by the interruption is redone, not trusted.
    partial = outputs.answers_path.with_name(outputs.answers_path.name + ".partial")
    partial.write_text(partial.read_text() + '{"qid": "1_3", "que')

    rerun = RunOutputs(tmp_path / "resumed", "t")
    assert sorted(rerun.completed()) == ["1_1", "1_2", "2_1"]
    assert _run_to(rerun, pipeline, convs) == ["2_2", "1_3"]

    assert (tmp_path / "resumed.run").read_text() == (tmp_path / "full.run").read_text()
    full = [json.loads(x) for x in (tmp_path / "full.answers.jsonl").read_text().splitlines()]
    resumed = [json.loads(x) for x in (tmp_path / "resumed.answers.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in resumed] == [r["answer"] for r in full]
    assert [r["qid"] for r in resumed] == ["1_1", "1_2", "1_3", "2_1", "2_2"]


def test_run_file_format(pipeline, tmp_path):
    _run_to(RunOutputs(tmp_path / "r", "mytag"), pipeline, conversations())
    lines = (tmp_path / "r.run").read_text().splitlines()
    first = lines[0].split()
    assert first[:2] == ["1_1", "Q0"] and first[3] == "1" and first[5] == "mytag"
    for line in lines:
        qid, q0, docid, rank, score, tag = line.split()
        float(score)
    per_qid = {}
    for line in lines:
        per_qid.setdefault(line.split()[0], []).append(int(line.split()[3]))
    assert all(ranks == list(range(1, len(ranks) + 1)) for ranks in per_qid.values())


def test_the_knowledge_base_settings_are_part_of_the_run_description(pipeline):
    stages = dict(pipeline.stages)
    described = [
        Pipeline(**stages, config={"knowledge_base": {"name": "collection", **extra}}).describe()[
            "knowledge_base"
        ]
        for extra in ({}, {"entities_dir": "/elsewhere"})
    ]
    assert described[0] == {"name": "collection"} and described[0] != described[1]


@pytest.mark.parametrize("history_responses", ["topics", "answers"])
def test_a_session_turn_by_turn_sees_the_history_a_run_sees(pipeline, history_responses):
    # The session is what `cast demo` and the explorer answer a typed conversation with.
    from cast.conversation.session import Session

    conversation = conversations()[0]
    first, *later = conversation.turns
    conversation = replace(conversation, turns=(replace(first, response="The canonical response."), *later))
    stages = dict(pipeline.stages)
    by_run, by_session = HistoryRecordingRewriter(), HistoryRecordingRewriter()
    config = {"history_responses": history_responses}
    run = answer_conversations(Pipeline(**{**stages, "rewriter": by_run}, config=config), [conversation])
    session = Session(Pipeline(**{**stages, "rewriter": by_session}, config=config), conversation)
    typed = [session.answer(turn) for turn in conversation.turns]
    assert by_session.responses == by_run.responses
    assert [r.rewrite for r in typed] == [r.rewrite for r in run]
    assert by_run.responses["1_2"] != [None]


def test_a_query_is_linked_after_the_conversations_earlier_queries_and_a_passage_alone(pipeline):
    from cast.core.registry import build_stage
    from cast.core.stages import EntityLinker

    class RecordingLinker(EntityLinker):
        name = "recording"

        def __init__(self) -> None:
            self.calls: list[tuple[str, list[str], Sequence[str] | None]] = []

        def link(self, text, *, kind="passage"):
            return []

        def link_batch(self, texts, *, kind="passage", contexts=None):
            self.calls.append((kind, list(texts), contexts))
            return [[] for _ in texts]

    linker = RecordingLinker()
    selector = build_stage("selector", {"name": "eg"}, None)
    answer_conversations(
        pipeline.with_stages(pipeline.config, linker=linker, selector=selector), conversations()[:1]
    )
    queries = [(texts, contexts) for kind, texts, contexts in linker.calls if kind == "query"]
    assert queries == [
        (["Tell me about Glasgow."], [""]),
        (["Which river flows through Glasgow?"], ["Tell me about Glasgow."]),
        (
            ["What climate conference was held in Glasgow?"],
            ["Tell me about Glasgow. Which river flows through Glasgow?"],
        ),
    ]
    passages = [contexts for kind, _, contexts in linker.calls if kind == "passage"]
    assert len(passages) == 3 and passages == [None] * 3
