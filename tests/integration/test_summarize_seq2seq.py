"""The seq2seq summarizer on tiny random T5, BART and PEGASUS models, through the real ``generate()`` path."""

from __future__ import annotations

import os

import pytest
import tiny_models

from cast.core.records import NO_ANSWER_TEXT, Passage, ScoredPassage, Selection
from cast.core.registry import build_stage
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.decoding import BeamDecoder, row_max_length_processor
from cast.infra.resources import Resources
from cast.infra.text import count_words
from cast.summarize.seq2seq import model_input

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAMILIES = ("t5", "bart", "pegasus")
PASSAGES = (
    "lung cancer symptoms come from smoking and the effects of smoking",
    "throat cancer is treatable and the treatment cost is what you know",
    "the garage door opener stopped working",
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_folders(tmp_path_factory):
    return {family: tiny_models.seq2seq(tmp_path_factory.mktemp(family), family) for family in FAMILIES}


def summarizer(folder, **settings):
    section = {"name": "seq2seq", "model": str(folder), **settings}
    return build_stage("summarizer", section, Resources({"device": "cpu"}))


def beam_search(stage, texts):
    """The token ids ``stage`` decodes for ``texts`` together, with each row's maximum length."""
    encoded = stage.tokenizer(texts, padding=True, return_tensors="pt")
    max_lengths = encoded["attention_mask"].sum(dim=1)
    output = stage.decoder(
        encoded["input_ids"], encoded["attention_mask"], max_lengths, **stage.generation_settings()
    )
    return output, max_lengths


def selection(*texts: str) -> Selection:
    return Selection(
        tuple(ScoredPassage(Passage(f"p{i}", t), 1.0 / (i + 1)) for i, t in enumerate(texts)), "o"
    )


def reference_answer(stage, chosen: Selection, **settings) -> tuple[str, int]:
    """The answer transformers' own ``generate()`` gives with the paper's decoding (and ``settings``), and the
    input's length."""
    import torch

    text = model_input("", chosen, with_query=False, prefix=stage.prefix)
    encoded = stage.tokenizer([text], return_tensors="pt")
    input_length = encoded["input_ids"].shape[1]
    with torch.inference_mode():
        reference = stage.model.generate(
            **encoded,
            num_beams=4,
            no_repeat_ngram_size=3,
            early_stopping=True,
            min_length=6,
            max_length=input_length,
            forced_eos_token_id=stage.eos_token_id,  # as the per-row maximum length does
            **settings,
        )
    return stage.tokenizer.decode(reference[0], skip_special_tokens=True).strip(), input_length


@pytest.mark.parametrize("family", FAMILIES)
def test_answer_is_plain_generate_with_the_papers_decoding(model_folders, family):
    stage = summarizer(model_folders[family], min_length=6)
    chosen = selection(*PASSAGES[:2])
    answer = stage.summarize("what causes cancer", chosen)

    reference, input_length = reference_answer(stage, chosen)
    assert answer.text == reference
    assert answer.source_ids == ("p0", "p1")
    assert answer.generator == f"seq2seq:{model_folders[family]}"
    assert answer.settings["num_beams"] == 4
    assert answer.settings["no_repeat_ngram_size"] == 3
    assert answer.settings["early_stopping"] is True
    assert answer.settings["min_length"] == 6
    assert answer.settings["max_length"] == input_length
    assert answer.no_answer_reason is None
    assert all(s.passage_id is None for s in answer.sentences)


@pytest.mark.parametrize("family", ("t5", "bart"))
def test_a_batch_answers_each_turn_as_if_alone(model_folders, family):
    stage = summarizer(model_folders[family], min_length=4, batch_size=3)
    # Inputs of different lengths: the short one reaches its own maximum length inside the batch.
    items = [
        ("why", selection(PASSAGES[0], PASSAGES[1])),
        ("what", selection("the door")),
        ("how", selection(PASSAGES[2], PASSAGES[0], PASSAGES[1])),
    ]
    batched = stage.summarize_batch(items)
    alone = [stage.summarize(q, s) for q, s in items]
    assert [a.text for a in batched] == [a.text for a in alone]
    assert [a.settings["max_length"] for a in batched] == [a.settings["max_length"] for a in alone]


def test_t5_reads_its_task_prefix_and_the_query_only_when_asked(model_folders):
    assert summarizer(model_folders["t5"]).prefix == "summarize: "
    assert summarizer(model_folders["bart"]).prefix == ""
    chosen = selection(" the door ", "", "is working")
    assert (
        model_input("how", chosen, with_query=False, prefix="summarize: ") == "summarize: the door is working"
    )
    assert model_input("how", chosen, with_query=True, prefix="") == "how the door is working"
    assert model_input("how", selection(" ", ""), with_query=True, prefix="summarize: ") == ""


def test_the_input_is_truncated_to_the_limit_and_bounds_the_answer(model_folders):
    stage = summarizer(model_folders["bart"], max_input_tokens=12)
    answer = stage.summarize("", selection(" ".join(PASSAGES)))
    assert answer.settings["max_input_tokens"] == 12
    assert answer.settings["max_length"] == 12
    # Start and end tokens take two of the 12 positions.
    assert 1 <= count_words(answer.text) <= 10


def test_min_length_keeps_a_model_that_wants_to_stop_talking(model_folders):
    stage = summarizer(model_folders["bart"])
    # Make the end of sequence by far the likeliest token everywhere.
    stage.model.final_logits_bias[0, stage.eos_token_id] = 100.0
    silent = stage.summarize("", selection(*PASSAGES))
    short = stage.with_min_length(6).summarize("", selection(*PASSAGES))
    longer = stage.with_min_length(12).summarize("", selection(*PASSAGES))
    assert silent.text == NO_ANSWER_TEXT
    assert silent.no_answer_reason == "the model generated no text"
    assert silent.source_ids == ("p0", "p1", "p2")
    assert short.no_answer_reason is None and longer.no_answer_reason is None
    assert count_words(short.text) < count_words(longer.text) <= 11
    assert short.settings["min_length"] == 6 and stage.min_length == 0


def test_passages_without_text_give_the_no_answer_text_without_decoding(model_folders):
    stage = summarizer(model_folders["t5"])
    answers = stage.summarize_batch(
        [("q", selection(" ", "")), ("q", selection()), ("q", selection(PASSAGES[2]))]
    )
    assert [a.text for a in answers[:2]] == [NO_ANSWER_TEXT, NO_ANSWER_TEXT]
    assert answers[0].no_answer_reason == "the selected passages have no text"
    assert answers[1].no_answer_reason == "no passages were selected"
    assert answers[0].generator == f"seq2seq:{model_folders['t5']}"
    assert answers[2].no_answer_reason is None and answers[2].text


def test_row_max_length_processor_forces_the_end_token_at_each_rows_last_position():
    import torch

    processor = row_max_length_processor(torch.tensor([4, 6]), num_beams=2, eos_token_id=1)
    scores = torch.zeros(4, 5)
    out = processor(torch.zeros(4, 3, dtype=torch.long), scores)  # 3 tokens so far: the next is the 4th
    assert out[:2, 1].tolist() == [0.0, 0.0]
    assert torch.isinf(out[:2, [0, 2, 3, 4]]).all()
    assert torch.equal(out[2:], scores[2:])


def test_a_missing_model_or_bad_setting_says_what_to_fix(tmp_path, model_folders):
    with pytest.raises(ModelUnavailableError, match="no folder"):
        summarizer(tmp_path / "absent")
    with pytest.raises(ConfigError, match="min_length"):
        summarizer(model_folders["t5"], min_length=-1)
    with pytest.raises(ConfigError, match="unknown setting"):
        summarizer(model_folders["t5"], beams=4)


# Inputs of 3 to 30 tokens: batched, the shortest reaches its own maximum length while the others go on.
TURNS = (" ".join(PASSAGES), "the door", f"{PASSAGES[2]} {PASSAGES[0]}")


def assert_same_tokens(plain, fast):
    """``fast`` decodes each of TURNS alone and all together into ``plain``'s tokens, within the limits."""
    for text in TURNS:
        alone, _ = beam_search(plain, [text])
        assert beam_search(fast, [text])[0].tolist() == alone.tolist(), text
    together, max_lengths = beam_search(plain, list(TURNS))
    fast_together = beam_search(fast, list(TURNS))[0]
    assert fast_together.tolist() == together.tolist()
    eos = plain.eos_token_id
    for row, max_length in zip(fast_together.tolist(), max_lengths.tolist(), strict=True):
        # Tokens after the decoder's start token, up to the end token (BART starts with the end token).
        length = row.index(eos, 1) + 1 if eos in row[1:] else len(row)
        assert min(plain.min_length, max_length) <= length <= max_length
        trigrams = list(zip(row[1:length], row[2:length], row[3:length], strict=False))
        assert len(trigrams) == len(set(trigrams))
    assert min(max_lengths.tolist()) < together.shape[1]  # the per-row cap did cut the short turn


def assert_decodes_as_plain(plain, fast):
    """Same tokens with the random model (long answers: no-repeat decides) and with one that wants to stop."""
    import torch

    assert_same_tokens(plain, fast)
    with torch.no_grad():
        for stage in (plain, fast):
            # A larger end-token row in the output layer: answers end early, where min_length lets them.
            stage.model.get_output_embeddings().weight[stage.eos_token_id] *= 3
    assert_same_tokens(plain, fast)


@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")  # "the door" is shorter than min_length
@pytest.mark.parametrize("family", FAMILIES)
def test_static_decoding_gives_the_tokens_of_plain_decoding(model_folders, family):
    plain = summarizer(model_folders[family], min_length=12)
    static = summarizer(model_folders[family], min_length=12, decoding="static")
    assert_decodes_as_plain(plain, static)
    items = [("q", selection(text)) for text in TURNS]
    answers = static.summarize_batch(items)
    assert [a.text for a in answers] == [a.text for a in plain.summarize_batch(items)]
    assert answers[0].settings["decoding"] == "static"
    assert plain.summarize("q", selection(TURNS[0])).settings["decoding"] == "plain"


# The published checkpoints' settings: BART-large-cnn (length penalty 2.0, forced BOS and EOS) and
# PEGASUS-cnn_dailymail (length penalty 0.8, forced EOS), on their tiny random stand-ins.
PUBLISHED_DECODING = {
    "bart": {"forced_bos_token_id": 0, "forced_eos_token_id": 2, "length_penalty": 2.0},
    "pegasus": {"forced_eos_token_id": 1, "length_penalty": 0.8},
}


def published_settings(model_folders, tmp_path, family):
    """A copy of the tiny ``family`` model whose config carries its published checkpoint's decoding settings."""
    import json

    settings = PUBLISHED_DECODING[family]
    task = {"summarization": {"length_penalty": settings["length_penalty"], "num_beams": 4}}
    folder = with_config(model_folders[family], tmp_path / family, task_specific_params=task, **settings)
    generation = folder / "generation_config.json"  # as the checkpoints publish them
    generation.write_text(json.dumps({**json.loads(generation.read_text()), **settings}))
    return folder


@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")
@pytest.mark.parametrize("family", ["bart", "pegasus"])
def test_static_decoding_gives_the_tokens_of_plain_decoding_at_the_published_settings(
    model_folders, tmp_path, family
):
    folder = published_settings(model_folders, tmp_path, family)
    plain = summarizer(folder, min_length=12)
    static = summarizer(folder, min_length=12, decoding="static")
    assert plain.generation_settings()["length_penalty"] == PUBLISHED_DECODING[family]["length_penalty"]
    described = plain.describe()
    assert described["forced_eos_token_id"] == PUBLISHED_DECODING[family]["forced_eos_token_id"]
    assert described["forced_bos_token_id"] == PUBLISHED_DECODING[family].get("forced_bos_token_id")
    assert_decodes_as_plain(plain, static)


@pytest.mark.slow  # compiling takes about a minute on a CPU
@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.jit")  # raised inside torch.compile
def test_compiled_decoding_gives_the_tokens_of_plain_decoding(model_folders, tmp_path):
    folder = published_settings(model_folders, tmp_path, "bart")  # length penalty 2.0, forced BOS and EOS
    plain = summarizer(folder, min_length=12)
    compiled = summarizer(folder, min_length=12, decoding="compiled")
    assert_decodes_as_plain(plain, compiled)


@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")
@pytest.mark.parametrize("published", [False, True])
def test_graphed_decoding_gives_the_tokens_of_plain_decoding(model_folders, tmp_path, published):
    """On a CPU the graphed step runs as it is: transformers' beam search and logits processors re-expressed
    over fixed-shape buffers must pick plain's tokens, with the published BART settings too."""
    folder = published_settings(model_folders, tmp_path, "bart") if published else model_folders["bart"]
    plain = summarizer(folder, min_length=12)
    graphed = summarizer(folder, min_length=12, decoding="graphed")
    assert_decodes_as_plain(plain, graphed)
    encoded = plain.tokenizer(list(TURNS), padding=True, return_tensors="pt")
    for settings in (  # one maximum for all rows; early_stopping False and "never"; length penalties
        dict(num_beams=3, no_repeat_ngram_size=2, early_stopping=False, length_penalty=1.3),
        dict(num_beams=4, no_repeat_ngram_size=0, early_stopping="never", length_penalty=0.8, min_length=3),
    ):
        expected = plain.decoder(encoded["input_ids"], encoded["attention_mask"], 9, **settings)
        assert graphed.decoder(encoded["input_ids"], encoded["attention_mask"], 9, **settings).tolist() == (
            expected.tolist()
        )


def test_graphed_decoding_refuses_what_it_does_not_apply(model_folders):
    graphed = summarizer(model_folders["bart"], decoding="graphed")
    encoded = graphed.tokenizer([TURNS[0]], return_tensors="pt")
    with pytest.raises(ValueError, match="graphed decoding does not apply repetition_penalty=1.2"):
        graphed.decoder(encoded["input_ids"], encoded["attention_mask"], 9, 4, repetition_penalty=1.2)
    with pytest.raises(ConfigError, match="'graphed' decodes BART models .*, not t5: use decoding: compiled"):
        summarizer(model_folders["t5"], decoding="graphed")


def test_an_unknown_decoding_or_a_model_without_a_static_cache_is_refused(tmp_path, model_folders):
    from transformers import LongT5Config, LongT5ForConditionalGeneration

    with pytest.raises(
        ConfigError, match="decoding must be one of plain, static, graphed, compiled, got 'fast'"
    ):
        summarizer(model_folders["t5"], decoding="fast")
    vocab_size = len(tiny_models.word_tokenizer(tmp_path, "t5"))
    config = LongT5Config(vocab_size=vocab_size, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)
    LongT5ForConditionalGeneration(config).save_pretrained(str(tmp_path))
    with pytest.raises(ConfigError, match="LongT5ForConditionalGeneration does not: use decoding: plain"):
        summarizer(tmp_path, decoding="compiled")
    assert summarizer(tmp_path).decoder.decoding == "plain"
    with pytest.raises(ConfigError, match="input limit"):
        BeamDecoder(summarizer(model_folders["t5"]).model, "static")


def with_config(source, folder, **changes):
    """A copy of the model folder ``source`` whose config.json has ``changes``."""
    import json
    import shutil

    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_the_checkpoints_summarization_settings_apply_under_the_papers_overrides(model_folders, tmp_path):
    # t5-base's published task settings: only the length penalty survives the paper's overrides.
    task = {"early_stopping": True, "length_penalty": 2.0, "max_length": 200, "min_length": 30}
    task |= {"no_repeat_ngram_size": 3, "num_beams": 4, "prefix": "summarize: "}
    folder = with_config(model_folders["t5"], tmp_path / "t5", task_specific_params={"summarization": task})
    stage = summarizer(folder, min_length=6)
    chosen = selection(*PASSAGES[:2])
    answer = stage.summarize("q", chosen)
    reference, input_length = reference_answer(stage, chosen, length_penalty=2.0)
    assert stage.prefix == "summarize: " and answer.text == reference
    settings = answer.settings
    assert settings["length_penalty"] == 2.0 and settings["min_length"] == 6 and settings["num_beams"] == 4
    assert settings["max_length"] == input_length and settings["prefix"] == "summarize: "
    assert summarizer(model_folders["t5"]).describe()["length_penalty"] == 1.0


def test_the_config_prefix_is_taken_as_the_summarization_pipeline_does(model_folders, tmp_path):
    # BART-large-cnn's config.json has "prefix": " " and no task prefix.
    assert summarizer(with_config(model_folders["bart"], tmp_path / "bart", prefix=" ")).prefix == " "
    assert summarizer(model_folders["bart"]).prefix == ""
    assert summarizer(model_folders["t5"]).prefix == "summarize: "


def test_pegasus_sentence_marks_are_removed_from_answers(model_folders):
    import torch

    stage = summarizer(model_folders["pegasus"])
    stage.tokenizer.add_tokens(["<n>"])
    ids = stage.tokenizer("the door is working . <n> the opener stopped .<n>", add_special_tokens=False)

    class Generated:  # what generate() gives: PEGASUS's "<n>" between sentences
        decoding = "plain"

        def __call__(self, *args, **kwargs):
            return torch.tensor([ids["input_ids"]])

    stage.decoder = Generated()
    answer = stage.summarize("q", selection(PASSAGES[2]))
    assert "<n>" not in answer.text
    assert answer.text == "the door is working. the opener stopped."
