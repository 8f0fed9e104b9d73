"""`cast answer` through the real command line, on the fixture index with the baseline stages."""

import subprocess
import sys

from fast_pipeline import FAST, cli_sets

BASELINE = cli_sets("rewriter.name=raw", *FAST)


def cast(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "cast.cli", "answer", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_interactive_session_answers_each_line_and_starts_over(core_index):
    proc = cast(
        "--index",
        str(core_index),
        *BASELINE,
        stdin="Which river flows through Glasgow?\n\n/new\ntreaty on climate change\n/quit\nignored\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert "The River Clyde flows through the city of Glasgow" in proc.stdout
    assert "[p4] River Clyde" in proc.stdout
    assert "[p6] Paris Agreement" in proc.stdout
    assert "empty utterance" in proc.stderr
    assert "(new conversation)" in proc.stderr
    assert "ignored" not in proc.stdout


def test_one_utterance_with_history_as_json(core_index):
    import json

    proc = cast(
        "--index",
        str(core_index),
        *BASELINE,
        "--json",
        "--history",
        "Tell me about Glasgow.",
        "--",
        "Which river flows through the city?",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["qid"] == "user_2"
    assert record["query"] == "Which river flows through the city?"
    assert record["answer"]["source_ids"][0] == "p4"


def test_later_turns_see_the_answers_the_user_read_as_responses():
    from cast.conversation.session import Session
    from cast.core.records import NO_ANSWER_TEXT, Answer, Rewrite, Selection, TurnResult

    class Pipeline:
        """Answers each turn with a fixed text and remembers the history it was given."""

        answers_as_responses = False  # the config's rule (topics): a typed conversation overrides it

        def __init__(self, answers):
            self.answers, self.seen = list(answers), []

        def answer_turn(self, history, turn, ptkb=()):
            self.seen.append(list(history))
            text, reason = self.answers.pop(0)
            answer = Answer(text, (), "fixed", no_answer_reason=reason)
            return TurnResult(
                turn, Rewrite(turn.utterance, "raw"), (), selection=Selection((), "o"), answer=answer
            )

    pipeline = Pipeline([("The Clyde.", None), (NO_ANSWER_TEXT, "no passages were selected"), ("Yes.", None)])
    conversation = Session.typed(pipeline)
    for utterance in ("Which river flows through Glasgow?", "How long is it?", "Is it navigable?"):
        conversation.ask(utterance)
    first, second = pipeline.seen[2]
    assert first.turn.response == "The Clyde." and first.query == "Which river flows through Glasgow?"
    assert second.turn.response is None  # "no answer" is not something the user can refer to
