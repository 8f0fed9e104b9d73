"""T5 rewriter: input formats, oldest-first history truncation, and real loading/batching/generate() with a
tiny random T5 built locally."""

from __future__ import annotations

import functools

import pytest
import tiny_models

from cast.core.records import Passage, PastTurn, Turn
from cast.core.registry import build_stage
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.resources import Resources
from cast.rewrite.t5 import ModelInput, build_input, keep_newest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory):
    return tiny_models.seq2seq(tmp_path_factory.mktemp("tiny-t5"), "t5")


def turn(n: int, utterance: str, response: str | None = None) -> Turn:
    return Turn(qid=f"31_{n}", topic_id="31", turn_id=str(n), utterance=utterance, response=response)


def past(n: int, utterance: str, top: str | None = None, response: str | None = None) -> PastTurn:
    passage = Passage(id=f"p{n}", text=top) if top else None
    return PastTurn(turn=turn(n, utterance, response), query=f"rewrite {n}", top_passage=passage)


HISTORY = [
    past(1, "What is throat cancer?", top="Throat cancer is a cancer of the throat."),
    past(2, "Is it treatable?", top="Treatment of throat cancer.", response="It is treatable with surgery."),
]


@functools.cache
def spacy_english():
    from spacy.lang.en import English

    return English()


def chatty_goose_input(utterances: list[str]) -> str:
    """chatty-goose's construction (``Ntr.rewrite``): join with ' ||| ', then re-tokenise with spaCy English."""
    return " ".join(token.text for token in spacy_english()(" ||| ".join(utterances)))


def test_castorini_format_joins_and_retokenises_as_chatty_goose():
    parts = build_input(HISTORY, "What are the symptoms?", "castorini")
    assert parts == ModelInput(
        "", "What is throat cancer ? ||| Is it treatable ? ||| ", "What are the symptoms ?"
    )
    history = [past(1, "Why didn't it spread?  Tell me (briefly).")]
    parts = build_input(history, "And the U.S. rates?", "castorini")
    assert parts.before + parts.history + parts.after == (
        "Why did n't it spread ?   Tell me ( briefly ) . ||| And the U.S. rates ?"
    )
    assert parts.before + parts.history + parts.after == chatty_goose_input(
        ["Why didn't it spread?  Tell me (briefly).", "And the U.S. rates?"]
    )


@pytest.mark.integration
def test_castorini_inputs_of_real_cast_2019_turns_are_chatty_goose_byte_for_byte(shared_data):
    from cast.formats.topics import load_topics

    conversations = load_topics(shared_data / "cast/2019/evaluation_topics_v1.0.json")
    checked = 0
    for conversation in conversations:
        utterances = [t.utterance for t in conversation.turns]
        history = [past(n, u) for n, u in enumerate(utterances)]
        for n, utterance in enumerate(utterances):
            parts = build_input(history[:n], utterance, "castorini")
            assert parts.before + parts.history + parts.after == chatty_goose_input(utterances[: n + 1])
            checked += 1
    assert checked == 479  # every evaluation turn


def test_castorini_format_can_use_previous_rewrites():
    assert (
        build_input(HISTORY, "q3", "castorini", history_query="rewrite").history
        == "rewrite 1 ||| rewrite 2 ||| "
    )


def test_paper_format_uses_response_where_given_else_top_passage():
    parts = build_input(HISTORY, "What are the symptoms?", "paper")
    assert parts.before == "What are the symptoms? [CTX] "
    assert parts.history == (
        "What is throat cancer? Throat cancer is a cancer of the throat. [TURN] Is it treatable? It is treatable with surgery."
    )
    assert parts.after == ""


def test_paper_format_without_passage_keeps_the_query():
    assert (
        build_input([past(1, "What is throat cancer?")], "Why?", "paper").history == "What is throat cancer?"
    )


def test_unknown_format_is_a_config_error():
    with pytest.raises(ConfigError, match="input_format"):
        build_input(HISTORY, "q", "other")


def test_keep_newest_cuts_the_oldest_tokens():
    assert keep_newest([1, 2, 3, 4, 5], 2) == [4, 5]
    assert keep_newest([1, 2, 3], 5) == [1, 2, 3]
    assert keep_newest([1, 2, 3], 0) == []
    assert keep_newest([1, 2, 3], -4) == []


def build_t5(folder, **settings):
    return build_stage(
        "rewriter", {"name": "t5", "model": str(folder), **settings}, Resources({"device": "cpu"})
    )


def test_long_history_is_cut_from_the_oldest_turn_and_keeps_the_current_utterance(tiny_t5):
    rewriter = build_t5(tiny_t5, max_input_length=12, num_beams=1, max_output_length=4)
    # castorini: 5 + 1 + 4 + 1 history tokens, 5 current ("what are the symptoms ?"), 1 for </s>: 6 history fit.
    ids, cut = rewriter.encode(build_input(HISTORY, "What are the symptoms?", "castorini"))
    assert len(ids) == 12 and cut == 5
    assert (
        rewriter.tokenizer.decode(ids, skip_special_tokens=True)  # the tiny word decoder glues "?" back
        == "||| is it treatable? ||| what are the symptoms?"
    )
    assert ids[-1] == rewriter.tokenizer.eos_token_id

    rewriter.input_format = "paper"
    ids, cut = rewriter.encode(build_input(HISTORY, "What are the symptoms?", "paper"))
    text = rewriter.tokenizer.decode(ids, skip_special_tokens=True)
    assert text.startswith("what are the symptoms? [ ctx ]") and text.endswith("with surgery.")
    assert len(ids) == 12 and cut > 0


def test_generate_records_the_model_input_and_batches_like_single_turns(tiny_t5):
    rewriter = build_t5(tiny_t5, num_beams=2, max_output_length=6, batch_size=2)
    items = [
        (HISTORY, turn(3, "What are the symptoms?")),
        ([], turn(1, "What is throat cancer?")),
        (HISTORY[:1], turn(2, "How much does it cost?")),
    ]
    batched = rewriter.rewrite_batch(items)
    singles = [rewriter.rewrite(history, t) for history, t in items]
    assert [r.query for r in batched] == [r.query for r in singles]
    first = batched[0]
    assert first.method == "t5" and first.query
    assert (
        first.inputs["model_input"]
        == "what is throat cancer? ||| is it treatable? ||| what are the symptoms?"
    )
    assert first.inputs["history_turns"] == 2 and first.inputs["history_tokens_cut"] == 0
    assert rewriter.describe()["model"] == str(tiny_t5)
    assert rewriter.describe()["history_query"] == "utterance"
    assert build_t5(tiny_t5, history_query="rewrite").describe()["history_query"] == "rewrite"


def test_static_decoding_gives_the_rewrites_of_plain_decoding(tiny_t5):
    import torch

    items = [
        (HISTORY, turn(3, "What are the symptoms?")),
        ([], turn(1, "What is throat cancer?")),
        (HISTORY[:1], turn(2, "How much does it cost?")),
    ]
    settings = {"num_beams": 4, "max_output_length": 20, "max_input_length": 64, "batch_size": 2}
    plain = build_t5(tiny_t5, **settings)
    static = build_t5(tiny_t5, decoding="static", **settings)
    for history, t in items:  # token for token, one turn at a time
        ids = torch.tensor([plain.encode(build_input(history, t.utterance, "castorini"))[0]])
        mask = torch.ones_like(ids)
        assert static.decoder(ids, mask, 20, 4).tolist() == plain.decoder(ids, mask, 20, 4).tolist()
    assert [r.query for r in static.rewrite_batch(items)] == [r.query for r in plain.rewrite_batch(items)]
    assert static.describe()["decoding"] == "static" and plain.describe()["decoding"] == "plain"
    with pytest.raises(ConfigError, match="rewriter.decoding must be one of"):
        build_t5(tiny_t5, decoding="fast")


PAPER_REWRITER = {"num_beams": 10, "max_output_length": 64, "max_input_length": 64, "batch_size": 2}


def assert_rewrites_as_plain(plain, fast):
    """Token for token at the paper's 10 beams x 64 tokens: one turn alone and two batched; then with a model
    that wants to stop early (a larger end-token row), where early stopping decides."""
    import torch

    items = [(HISTORY, turn(3, "What are the symptoms?")), ([], turn(1, "What is throat cancer?"))]
    ids = torch.tensor([plain.encode(build_input(HISTORY, "What are the symptoms?", "castorini"))[0]])
    mask = torch.ones_like(ids)
    expected = plain.decoder(ids, mask, 64, 10, early_stopping=True)
    assert expected.shape[1] == 64  # the random model runs to the limit
    assert fast.decoder(ids, mask, 64, 10, early_stopping=True).tolist() == expected.tolist()
    assert [r.query for r in fast.rewrite_batch(items)] == [r.query for r in plain.rewrite_batch(items)]
    with torch.no_grad():
        for stage in (plain, fast):
            stage.model.get_output_embeddings().weight[stage.tokenizer.eos_token_id] *= 4
    assert [r.query for r in fast.rewrite_batch(items)] == [r.query for r in plain.rewrite_batch(items)]


def test_static_decoding_gives_the_rewrites_of_plain_decoding_at_10_beams_by_64_tokens(tiny_t5):
    assert_rewrites_as_plain(
        build_t5(tiny_t5, **PAPER_REWRITER), build_t5(tiny_t5, decoding="static", **PAPER_REWRITER)
    )


@pytest.mark.slow  # compiling takes a minute or more on a CPU
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.jit")  # raised inside torch.compile
def test_compiled_decoding_gives_the_rewrites_of_plain_decoding_at_10_beams_by_64_tokens(tiny_t5):
    compiled = build_t5(tiny_t5, decoding="compiled", **PAPER_REWRITER)
    assert_rewrites_as_plain(build_t5(tiny_t5, **PAPER_REWRITER), compiled)


def test_missing_model_fails_at_construction_naming_it_and_how_to_get_it(tmp_path):
    with pytest.raises(ModelUnavailableError) as error:
        build_t5("castorini/t5-not-in-this-cache")
    message = str(error.value)
    assert "castorini/t5-not-in-this-cache" in message
    assert "download" in message and "local folder" in message

    with pytest.raises(ModelUnavailableError, match="there is no folder"):
        build_t5(tmp_path / "absent")


def test_paper_format_with_a_castorini_checkpoint_warns_at_start_up(tiny_t5, tmp_path, caplog):
    import shutil

    canard = shutil.copytree(tiny_t5, tmp_path / "t5-base-canard")
    with caplog.at_level("WARNING", logger="cast.rewrite.t5"):
        build_t5(canard, input_format="castorini")
        assert not caplog.records
        build_t5(canard, input_format="paper")
    assert "trained on the castorini input format" in caplog.text


def test_castorini_rewrites_are_decoded_with_tokenisation_clean_up(tiny_t5):
    import torch
    from tokenizers import decoders

    rewriter = build_t5(tiny_t5, num_beams=1, max_output_length=8)
    # As T5's SentencePiece decoder: spaces kept between all tokens; only the clean-up glues punctuation.
    rewriter.tokenizer.backend_tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    ids = rewriter.tokenizer("what is throat cancer ? it is , to", add_special_tokens=False)["input_ids"]
    rewriter.decoder = lambda *args, **kwargs: torch.tensor(
        [ids]
    )  # the model's tokens, as generate() gives them
    assert rewriter.rewrite([], turn(1, "q")).query == "what is throat cancer? it is, to"
