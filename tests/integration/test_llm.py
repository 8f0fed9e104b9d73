"""The chat-model client and the LLM stages against a real server process (tests/chat_server.py on 127.0.0.1):
the protocol subset they use, the cache, the API key, error codes, slow, trickled and dropped answers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chat_server import RunningServer
from test_llm_without_server import HELLO

from cast.core.records import AnswerSentence, Passage, PastTurn, ScoredPassage, Selection, Turn
from cast.core.registry import stage_class
from cast.errors import ServiceUnavailableError
from cast.infra.cache import Cache
from cast.infra.llm import ChatClient, ChatServer
from cast.infra.resources import Resources


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    running = RunningServer()
    yield running
    running.stop()


@pytest.fixture
def chat(server: RunningServer) -> RunningServer:
    server.clear()
    return server


def client(server: RunningServer, cache: Cache | None = None, **settings) -> ChatClient:
    return ChatClient(ChatServer(server.url, **{"retries": 0, "backoff": 0.0, **settings}), cache)


# --- the client ----------------------------------------------------------------------------------------------


def test_a_request_is_a_chat_completion_with_the_parameters_and_streaming_off(chat):
    reply = client(chat).complete("last-line", HELLO, temperature=0.0, seed=0, max_tokens=8)
    assert reply.text == "Hello there"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (4, 2, "stop")
    [request] = chat.log()
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {
        "model": "last-line",
        "messages": HELLO,
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 8,
        "stream": False,
    }
    assert request["authorization"] is None  # no key configured, none sent


def test_answers_come_from_the_cache_keyed_by_model_messages_and_parameters(chat, tmp_path):
    cache = Cache(tmp_path / "cache.sqlite")
    first = client(chat, cache).complete("last-line", HELLO, max_tokens=8)
    again = client(chat, Cache(tmp_path / "cache.sqlite")).complete("last-line", HELLO, max_tokens=8)
    assert not first.cached and again.cached
    assert again.usage() == first.usage() and again.text == first.text
    assert len(chat.log()) == 1  # the second client asked nothing
    client(chat, cache).complete("last-line", HELLO, max_tokens=9)  # other parameters: another key
    client(chat, cache).complete("echo", HELLO, max_tokens=8)  # another model: another key
    assert len(chat.log()) == 3


def test_the_api_key_comes_from_the_named_variable_and_is_never_recorded(chat, monkeypatch):
    monkeypatch.setenv("CAST_TEST_KEY", "sk-secret-123")
    rewriter = stage_class("rewriter", "llm")(
        model="last-line", base_url=chat.url, api_key_env="CAST_TEST_KEY"
    )
    rewrite = rewriter.rewrite([], Turn("1_1", "1", "1", "Where is Glasgow?"))
    assert chat.log()[0]["authorization"] == "Bearer sk-secret-123"
    recorded = json.dumps([rewriter.describe(), rewrite.inputs])
    assert "sk-secret-123" not in recorded and "CAST_TEST_KEY" in recorded


def test_a_rejected_request_is_one_line_and_not_retried(chat):
    with pytest.raises(ServiceUnavailableError, match="HTTP 400.*maximum context length") as error:
        client(chat, retries=3).complete("error-400", HELLO)
    assert "\n" not in str(error.value)
    assert len(chat.log()) == 1


def test_an_unknown_model_is_named_in_the_error(chat):
    with pytest.raises(ServiceUnavailableError, match="HTTP 404.*does not exist"):
        client(chat).complete("no-such-model", HELLO)


def test_server_errors_are_retried_then_the_server_is_not_asked_again(chat):
    asking = client(chat, retries=2, give_up_after=1)
    with pytest.raises(ServiceUnavailableError, match=r"unreachable \(HTTP 500, 3 attempts\)"):
        asking.complete("error-500", HELLO)
    assert len(chat.log()) == 3
    with pytest.raises(ServiceUnavailableError, match="not asked again"):
        asking.complete("last-line", HELLO)
    assert len(chat.log()) == 3


def test_an_overloaded_server_is_asked_again(chat):
    reply = client(chat, retries=1).complete(
        "flaky", [{"role": "user", "content": "[1] It is tall. It is old."}]
    )
    assert reply.text == "It is tall. [1]"
    assert len(chat.log()) == 2


@pytest.mark.parametrize(
    "model, problem",
    [
        ("slow", "no complete answer within 0.5 s"),
        ("trickle", "no complete answer within 0.5 s"),
        ("drop", "cannot connect|no answer"),
    ],
)
def test_slow_trickled_and_dropped_answers_end_in_one_line(chat, model, problem):
    with pytest.raises(ServiceUnavailableError, match=problem) as error:
        client(chat, timeout=0.5).complete(model, HELLO)
    assert "\n" not in str(error.value) and "start the model server" in str(error.value)


@pytest.mark.parametrize(
    "model, problem", [("not-json", "other than JSON"), ("no-choices", "other than a chat completion")]
)
def test_an_answer_that_is_not_a_chat_completion_is_refused(chat, model, problem):
    with pytest.raises(ServiceUnavailableError, match=problem):
        client(chat).complete(model, HELLO)


def test_requests_in_flight_are_bounded_by_the_concurrency():
    slow = RunningServer("--delay", "0.2")
    try:
        asking = client(slow, concurrency=2)
        prompts = [[{"role": "user", "content": f"question {n}"}] for n in range(6)]
        replies = asking.complete_many("last-line", prompts, max_tokens=8)
        assert [r.text for r in replies] == [f"question {n}" for n in range(6)]
        assert 1 <= slow.stats()["max_in_flight"] <= 2
        assert asking.counters()["requests"] == 6
    finally:
        slow.stop()


def test_a_failed_request_keeps_the_answers_of_the_others(chat, tmp_path):
    cache = Cache(tmp_path / "cache.sqlite")
    failing = [{"role": "user", "content": "please fail"}]
    with pytest.raises(ServiceUnavailableError, match="HTTP 500"):
        client(chat, cache, concurrency=1).complete_many("last-line", [HELLO, failing])
    again = client(chat, cache)
    assert again.complete("last-line", HELLO).cached
    assert again.counters()["requests"] == 0


# --- the rewriter -------------------------------------------------------------------------------------------------

FIRST = Turn(
    "1_1", "1", "1", "Tell me about Marie Curie.", response="Marie Curie was a physicist and chemist."
)
SECOND = Turn("1_2", "1", "2", "What did she win?")


def test_the_rewriter_sends_the_conversation_with_responses_and_the_users_statements(chat):
    from cast.rewrite.ptkb import STATEMENTS_TURN_ID

    rewriter = stage_class("rewriter", "llm")(model="last-line", base_url=chat.url, response_words=3)
    statements = Turn("1_ptkb", "1", STATEMENTS_TURN_ID, "I am a chemistry student.")
    history = [PastTurn(FIRST, FIRST.utterance), PastTurn(statements, statements.utterance)]
    rewrite = rewriter.rewrite(history, SECOND)
    assert rewrite.query == "What did she win?"  # the model's "Question: ..." line without its label
    assert rewrite.inputs["usage"]["completion_tokens"] == 5
    sent = chat.log()[0]["body"]["messages"][-1]["content"]
    assert sent == (
        "About the user: I am a chemistry student.\n\nConversation:\nUSER: Tell me about Marie Curie.\n"
        "SYSTEM: Marie Curie was …\n\nQuestion: What did she win?"
    )
    described = rewriter.describe()
    assert described["prompt"] == "rewrite" and len(described["prompt_sha256"]) == 64


def test_the_rewriter_shows_only_the_latest_responses(chat):
    rewriter = stage_class("rewriter", "llm")(model="echo", base_url=chat.url, response_turns=0)
    rewriter.rewrite([PastTurn(FIRST, FIRST.utterance)], SECOND)
    assert "SYSTEM:" not in chat.log()[0]["body"]["messages"][-1]["content"]


def test_an_empty_rewrite_falls_back_to_the_utterance(chat, tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("=== system ===\n{{conversation}} {{question}}\n=== user ===\n")  # answered with nothing
    rewriter = stage_class("rewriter", "llm")(model="last-line", base_url=chat.url, prompt=str(blank))
    rewrite = rewriter.rewrite([], SECOND)
    assert rewrite.query == SECOND.utterance and "fallback" in rewrite.inputs


# --- the summarizer ---------------------------------------------------------------------------------------------

SELECTION = Selection(
    passages=(
        ScoredPassage(
            Passage("p1", "Marie Curie won the Nobel Prize in Physics in 1903. She also won chemistry."), 2.0
        ),
        ScoredPassage(Passage("p2", "Pierre Curie was her husband. He died in 1906 in Paris."), 1.0),
    ),
    method="o",
)


def test_the_answer_is_parsed_into_sentences_attributed_to_the_passages_they_cite(chat):
    summarizer = stage_class("summarizer", "llm")(model="cite", base_url=chat.url)
    answer = summarizer.summarize("What did Marie Curie win?", SELECTION)
    assert answer.text == "Marie Curie won the Nobel Prize in Physics in 1903. Pierre Curie was her husband."
    assert [(s.text, s.passage_id) for s in answer.sentences] == [
        ("Marie Curie won the Nobel Prize in Physics in 1903.", "p1"),
        ("Pierre Curie was her husband.", "p2"),
    ]
    assert answer.generator == "llm:cite" and answer.settings["usage"]["prompt_tokens"] > 0
    sent = chat.log()[0]["body"]
    assert "[1] Marie Curie won" in sent["messages"][-1]["content"]
    assert "at most 50 words" in sent["messages"][0]["content"]
    assert sent["max_tokens"] == 3 * 50 + 32


def test_the_answer_is_cut_to_its_word_bound(chat):
    answer = stage_class("summarizer", "llm")(model="cite", base_url=chat.url, words=12).summarize(
        "q", SELECTION
    )
    assert [s.text for s in answer.sentences] == ["Marie Curie won the Nobel Prize in Physics in 1903."]
    assert answer.settings["cut"] is True
    short = stage_class("summarizer", "llm")(model="cite", base_url=chat.url, words=3).summarize(
        "q", SELECTION
    )
    assert short.text == "Marie Curie won…"


def test_a_selection_without_text_is_no_answer_and_asks_nothing(chat):
    empty = Selection(passages=(ScoredPassage(Passage("p1", "  "), 1.0),), method="o")
    answer = stage_class("summarizer", "llm")(model="cite", base_url=chat.url).summarize("q", empty)
    assert answer.no_answer_reason is not None and chat.log() == []


# --- the verifier -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_resources() -> Resources:
    return Resources({"cache_dir": None, "device": "cpu"})


def test_an_invented_claim_is_dropped_and_the_supported_ones_kept(chat, offline_resources):
    summarizer = stage_class("summarizer", "llm")(model="invent", base_url=chat.url)
    generated = summarizer.summarize("What did Marie Curie win?", SELECTION)
    verifier = stage_class("verifier", "claims").from_config({}, offline_resources)
    answer, verification = verifier.verify("What did Marie Curie win?", SELECTION, generated)
    assert verification is not None and not verification.abstained
    supported = [(c.supported, c.kept) for c in verification.claims]
    assert supported == [(False, False), (True, True), (True, True)]
    assert answer.text == "Marie Curie won the Nobel Prize in Physics in 1903. Pierre Curie was her husband."
    assert verification.original_text == generated.text


def test_marked_claims_stay_in_the_answer(chat, offline_resources):
    generated = stage_class("summarizer", "llm")(model="invent", base_url=chat.url).summarize("q", SELECTION)
    verifier = stage_class("verifier", "claims").from_config({"unsupported": "mark"}, offline_resources)
    answer, verification = verifier.verify("What did Marie Curie win?", SELECTION, generated)
    assert answer == generated
    assert verification is not None and [c.kept for c in verification.claims] == [True, True, True]
    assert not verification.claims[0].supported


def test_the_verifier_abstains_when_the_passages_are_far_from_the_question(chat, offline_resources):
    generated = stage_class("summarizer", "llm")(model="cite", base_url=chat.url).summarize("q", SELECTION)
    verifier = stage_class("verifier", "claims").from_config({"min_relevance": 0.9}, offline_resources)
    answer, verification = verifier.verify("How do volcanoes erupt?", SELECTION, generated)
    assert answer.text == "I could not find an answer to that in the collection."
    assert answer.no_answer_reason is not None and "min_relevance" in answer.no_answer_reason
    assert verification is not None and verification.abstained and verification.relevance < 0.9


def test_claims_without_a_citation_are_scored_against_and_attributed_to_the_best_passage(offline_resources):
    from cast.core.records import Answer, AnswerSentence

    generated = Answer(
        "Pierre Curie died in 1906. The moon is cheese.",
        ("p1", "p2"),
        "seq2seq:x",
        sentences=(
            AnswerSentence("Pierre Curie died in 1906.", None),
            AnswerSentence("The moon is cheese.", None),
        ),
    )
    verifier = stage_class("verifier", "claims").from_config({}, offline_resources)
    answer, verification = verifier.verify("When did Pierre Curie die?", SELECTION, generated)
    assert verification is not None
    assert [(c.passage_id, c.supported) for c in verification.claims] == [("p2", True), ("p1", False)]
    assert answer.text == "Pierre Curie died in 1906."
    # attributed to the passage that supports it, not dropped nor credited to the first passage
    assert answer.sentences == (AnswerSentence("Pierre Curie died in 1906.", "p2"),)


def test_a_name_or_number_the_passage_lacks_lowers_the_support(offline_resources):
    verifier = stage_class("verifier", "claims").from_config({}, offline_resources)
    passage = ["Marie Curie won the Nobel Prize in Physics in 1903."]
    [right] = verifier.support("Marie Curie won the Nobel Prize in Physics in 1903.", passage)
    [wrong] = verifier.support("Marie Curie won the Nobel Prize in Physics in 1911.", passage)
    assert right == pytest.approx(0.87102, abs=1e-5) and wrong < right  # every overlap full: the most support


def test_cast_eval_answers_measures_the_verifiers_support(tmp_path, offline_resources):
    from cast.evaluate.answers import TextScorer, evaluate_answers
    from cast.formats.answers import read_answers

    sentences = [
        {"text": "Marie Curie won the Nobel Prize in Physics in 1903.", "passage_id": "p1"},
        {"text": "The passages say the moon is made of green cheese.", "passage_id": "p1"},
    ]
    record = {
        "qid": "1_1",
        "answer": {
            "text": " ".join(s["text"] for s in sentences),
            "source_ids": ["p1", "p2"],
            "sentences": sentences,
        },
    }
    path = tmp_path / "sys.answers.jsonl"
    path.write_text(json.dumps(record) + "\n")
    texts = {p.id: p.passage.text for p in SELECTION.passages}
    verifier = stage_class("verifier", "claims").from_config({}, offline_resources)
    evaluation = evaluate_answers(
        read_answers(path),
        {"1_1": ["Marie Curie won the 1903 Nobel Prize in Physics."]},
        scorer=TextScorer(),
        references_name="test",
        passage_texts=texts,
        verifier=verifier,
    )
    row = evaluation.per_turn.loc["1_1"]
    assert row["verified"] == 50.0
    supports = [verifier.score_claim(AnswerSentence(**s), texts)[1] for s in sentences]
    assert row["claim_support"] == pytest.approx(100 * sum(supports) / 2)
