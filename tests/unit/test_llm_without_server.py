"""The chat-model client and the LLM stages where no server answers: start-up errors, the templates, parsing
replies and citations, the offline support formula."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from cast.core.registry import stage_class
from cast.errors import ConfigError, ServiceUnavailableError
from cast.infra.llm import ChatClient, ChatServer, parse_completion
from cast.infra.prompts import PromptTemplate

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HELLO = [{"role": "user", "content": "Say hello.\nHello there"}]


def test_a_named_key_variable_that_is_not_set_stops_at_start_up(monkeypatch):
    monkeypatch.delenv("CAST_TEST_MISSING", raising=False)
    with pytest.raises(ConfigError, match="CAST_TEST_MISSING.*not set"):
        stage_class("rewriter", "llm")(model="m", api_key_env="CAST_TEST_MISSING")


def test_an_unreachable_server_is_one_line_naming_it():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ServiceUnavailableError, match=f"{url}.*unreachable.*start the model server") as error:
        ChatClient(ChatServer(url, retries=0), None).complete("m", HELLO)
    assert "\n" not in str(error.value)


def test_a_reply_without_usage_has_no_token_counts():
    reply = parse_completion({"choices": [{"message": {"content": " Hi "}, "finish_reason": "stop"}]})
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Hi", None, None)


# --- prompt templates -----------------------------------------------------------------------------------------


def test_the_shipped_templates_load_with_their_placeholders():
    rewrite = PromptTemplate.load("rewrite", {"conversation", "question"}, {"statements"})
    answer = PromptTemplate.load("answer", {"passages", "question"}, {"words"})
    assert rewrite.messages[0][0] == "system" and rewrite.messages[-1][0] == "user"
    assert sum(role == "assistant" for role, _ in rewrite.messages) == 5  # the few-shot examples
    assert len(answer.sha256) == 64


@pytest.mark.parametrize(
    "text, problem",
    [
        ("=== user ===\n{{question}} {{colour}}", "unknown {{colour}}"),
        ("=== user ===\nNo placeholder", "no {{question}}"),
        ("=== robot ===\n{{question}}", "unknown role 'robot'"),
        ("{{question}}", "no message"),
        ("=== user ===\n{{question}}\n=== assistant ===\nSure.", "last message must be the user's"),
    ],
)
def test_a_template_that_does_not_fit_its_stage_is_refused(tmp_path, text, problem):
    path = tmp_path / "mine.txt"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem.replace("{", r"\{").replace("(", r"\(")):
        PromptTemplate.load(str(path), {"question"})


def test_a_value_with_braces_is_put_in_as_it_is():
    template = PromptTemplate.parse("t", "=== user ===\n{{question}} / {{other}}", {"question", "other"})
    assert template.render(question="{{other}}", other="x")[0]["content"] == "{{other}} / x"


@pytest.mark.parametrize(
    "reply, query",
    [
        ('Rewritten question: "What did Marie Curie win?"\nShe is Marie Curie.', "What did Marie Curie win?"),
        ("**Rewrite:** What did Marie Curie win?", "What did Marie Curie win?"),
        ("\n\n  What did Marie Curie win?  ", "What did Marie Curie win?"),
        ("What did Marie Curie win? I replaced 'she' with her name.", "What did Marie Curie win?"),
        (
            "What about the DASH diet? I heard it is healthy.",
            "What about the DASH diet? I heard it is healthy.",
        ),
    ],
)
def test_the_query_is_the_replys_first_line_without_a_label(reply, query):
    from cast.rewrite.llm import clean_rewrite

    assert clean_rewrite(reply) == query


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("It is tall [1]. It is old [2].", [("It is tall.", "p1"), ("It is old.", "p2")]),
        ("It is tall. [2] It is old [1, 2].", [("It is tall.", "p2"), ("It is old.", "p1")]),
        ("It is tall [7]. It is old.", [("It is tall.", None), ("It is old.", None)]),
        ("It is tall [2][1].", [("It is tall.", "p2")]),
    ],
)
def test_citations_attribute_sentences(reply, expected):
    from cast.summarize.llm import attributed_sentences

    assert [(s.text, s.passage_id) for s in attributed_sentences(reply, ["p1", "p2"])] == expected


def test_offline_support_follows_its_formula():
    from cast.summarize.verify import PassageEvidence, lexical_parts, offline_support

    parts = lexical_parts("Curie won prizes in 1903.", PassageEvidence.of("Marie Curie won a prize."))
    # words: curie, won, prizes, in, 1903 -> curie, won found (2/5); content: curie, won, prize, 1903 -> 3/4;
    # names and numbers: 1903 (not found) -> 0; missing: prizes, in, 1903 -> 3
    assert parts == pytest.approx((2 / 5, 3 / 4, 0.0, 3.0))
    # 2.13 * 0.4 + 2.68 * 0.75 + 0.49 * 0 - 0.44 * 3 - 3.39 = -1.848; 1 / (1 + e^1.848) = 0.13611
    assert offline_support(parts) == pytest.approx(0.13611, abs=1e-5)
    assert offline_support((1.0, 1.0, 1.0, 0.0)) == pytest.approx(0.87102, abs=1e-5)  # 1 / (1 + e^-1.91)


def test_an_nli_model_without_an_entailment_label_is_refused():
    from types import SimpleNamespace

    from cast.summarize.verify import entailment_index

    assert (
        entailment_index(SimpleNamespace(id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"})) == 1
    )
    with pytest.raises(ConfigError, match="entailment_label"):
        entailment_index(SimpleNamespace(id2label={0: "LABEL_0", 1: "LABEL_1"}))


# --- what a real small model wrote (SmolLM2-135M-Instruct through transformers serve, recorded once) -----------

RECORDED = [
    json.loads(line) for line in (FIXTURES / "llm" / "smollm2-replies.jsonl").read_text().splitlines()
]


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda r: f"{r['stage']}: {r['reply'][:40]}")
def test_recorded_replies_read_as_their_answer(recorded):
    from cast.rewrite.llm import clean_rewrite
    from cast.summarize.llm import attributed_sentences, clean_answer

    if recorded["stage"] == "rewriter":
        assert clean_rewrite(recorded["reply"]) == recorded["expected"]
        return
    ids = [f"p{n}" for n in range(1, recorded["passages"] + 1)]
    text = clean_answer(recorded["reply"], cut=recorded["finish_reason"] == "length")
    expected = [(sentence, None if n is None else f"p{n}") for sentence, n in recorded["expected"]]
    assert [(s.text, s.passage_id) for s in attributed_sentences(text, ids)] == expected
