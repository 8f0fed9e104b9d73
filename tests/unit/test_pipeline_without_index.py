"""The pipeline's checks and pieces that need no index: a missing index, merging the head, monotone scores,
outputs not overwritten."""

import pytest
from fast_pipeline import FAST

from cast.core.config import load_config
from cast.core.pipeline import Pipeline, merge_head
from cast.core.records import Conversation, Passage, ScoredPassage, Turn
from cast.errors import CastError
from cast.formats.outputs import RunOutputs, run_scores


def baseline_config(index, **overrides):
    sets = [f"index={index}", "rewriter.name=manual", *FAST, "summarizer.words=12"]
    sets += [f"{k}={v}" for k, v in overrides.items()]
    return load_config("offline", sets)


def conversations():
    def turns(topic, texts):
        return tuple(
            Turn(qid=f"{topic}_{i}", topic_id=topic, turn_id=str(i), utterance=u, manual_rewrite=m)
            for i, (u, m) in enumerate(texts, start=1)
        )

    return [
        Conversation(
            "1",
            turns(
                "1",
                [
                    ("Tell me about Glasgow.", "Tell me about Glasgow."),
                    ("Which river flows through it?", "Which river flows through Glasgow?"),
                    ("What conference was held there?", "What climate conference was held in Glasgow?"),
                ],
            ),
        ),
        Conversation(
            "2",
            turns(
                "2",
                [
                    ("What is climate change?", "What is climate change?"),
                    ("A treaty on it?", "treaty climate change"),
                ],
            ),
        ),
    ]


def test_missing_index_is_a_clear_error(tmp_path):
    pipe = Pipeline.from_config(baseline_config(tmp_path / "nowhere"))
    with pytest.raises(CastError, match="no index at .*nowhere.*cast index build"):
        pipe.answer_turn([], conversations()[0].turns[0])


def test_merge_head_keeps_first_stage_order_below_head():
    def sp(pid, score):
        return ScoredPassage(Passage(pid, ""), score)

    ranking = [sp("a", 3), sp("b", 2), sp("c", 1), sp("d", 0.5)]
    assert [p.id for p in merge_head([sp("b", 0.9), sp("a", 0.1)], ranking)] == ["b", "a", "c", "d"]
    assert merge_head([], ranking) == ranking


def test_run_scores_stay_monotone():
    def sp(score):
        return ScoredPassage(Passage("x", ""), score)

    assert run_scores([sp(-1.0), sp(-2.0)]) == [-1.0, -2.0]
    assert run_scores([sp(0.9), sp(0.1), sp(5.0)]) == [3.0, 2.0, 1.0]


def test_existing_outputs_are_not_overwritten(tmp_path):
    (tmp_path / "r.run").write_text("x")
    with pytest.raises(CastError, match="already exists.*--overwrite"):
        RunOutputs(tmp_path / "r", "t")
    RunOutputs(tmp_path / "r", "t", overwrite=True)
