"""Tiny randomly initialised Hugging Face models and word-level tokenizers, built locally (never downloaded).

They exercise the real loading, batching, ``generate()`` and scoring code of the neural stages in a few
seconds. Build them once per test session into a temporary folder, e.g.::

    @pytest.fixture(scope="session")
    def tiny_t5(tmp_path_factory):
        return tiny_models.seq2seq(tmp_path_factory.mktemp("t5"), "t5")

Each builder saves the model and its tokenizer into the folder and returns the folder, which the stages load
with ``model: <folder>`` as they would a real checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

# Enough words for the fixtures' conversations; anything else maps to the unknown token.
WORDS = """
a about after and are as at be by can cancer causes come cost data do does door effects fix for from garage how much
in is it its know lung me of on opener or repair smoking stopped symptoms tell that the these this throat to
surgery treatable treatment what when where which who why with working you your [ ] ctx turn ||| . , ? ! ' -
""".split()

SEED = 1234
SPECIALS = {"t5": ["<pad>", "</s>", "<unk>"], "bart": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]}


def word_tokenizer(folder: Path, family: str, words: Iterable[str] = WORDS):
    """A lower-casing word-level tokenizer, saved in ``folder`` and returned, with the specials of ``family``.

    ``family`` is ``t5`` (``</s>`` appended), ``bart`` or ``pegasus`` (``<s> ... </s>``, as BART; PEGASUS uses
    ``</s>`` only but the stages never rely on the difference), or ``bert`` (``[CLS] a [SEP] b [SEP]``).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if family == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    else:
        specials = SPECIALS["t5" if family == "t5" else "bart"]
    vocab = {token: i for i, token in enumerate(dict.fromkeys([*specials, *words]))}
    unk = "[UNK]" if family == "bert" else "<unk>"
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), _punctuation()])
    if family == "bert":
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
        named = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
    elif family == "t5":
        tokenizer.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", vocab["</s>"])]
        )
        named = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
    else:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>",
            pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])],
        )
        named = {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with spaces
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=512, **named)
    folder.mkdir(parents=True, exist_ok=True)
    wrapped.save_pretrained(str(folder))
    return wrapped


def _punctuation():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Split(Regex(r"\|\|\||[\[\].,?!'-]"), behavior="isolated")


def seq2seq(folder: Path, family: str = "t5") -> Path:
    """A tiny random encoder-decoder (``t5``, ``bart`` or ``pegasus``) and its tokenizer, saved in ``folder``."""
    import torch
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        PegasusConfig,
        PegasusForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
    )

    vocab_size = len(word_tokenizer(folder, family))
    torch.manual_seed(SEED)
    if family == "t5":
        config = T5Config(
            vocab_size=vocab_size,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
        model = T5ForConditionalGeneration(config)
    else:
        shape = dict(
            vocab_size=vocab_size,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_position_embeddings=512,
            bos_token_id=0,
            pad_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=2,
        )
        if family == "bart":
            model = BartForConditionalGeneration(BartConfig(**shape))
        elif family == "pegasus":
            model = PegasusForConditionalGeneration(PegasusConfig(**shape))
        else:
            raise ValueError(f"unknown seq2seq family {family!r}: use t5, bart or pegasus")
    model.save_pretrained(str(folder))
    return folder


def bert_classifier(folder: Path, num_labels: int = 2) -> Path:
    """A tiny random BERT sequence-pair classifier (monoBERT's shape, scaled down) and its tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    vocab_size = len(word_tokenizer(folder, "bert"))
    torch.manual_seed(SEED)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).save_pretrained(str(folder))
    return folder
