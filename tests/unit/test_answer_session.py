"""`cast answer`'s session: later turns see the answers the user read as responses."""


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
