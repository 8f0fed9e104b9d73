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

from cast import testing

# Enough words for the fixtures' conversations; anything else maps to the unknown token.
WORDS = """
a about after and are as at be by can cancer causes come cost data do does door effects fix for from garage how much
in is it its know lung me of on opener or repair smoking stopped symptoms tell that the these this throat to
surgery treatable treatment what when where which who why with working you your [ ] ctx turn ||| . , ? ! ' -
""".split()

SEED = 1234


def word_tokenizer(folder: Path, family: str, words: Iterable[str] = WORDS):
    """:func:`cast.testing.word_tokenizer` over the fixtures' words."""
    return testing.word_tokenizer(folder, family, words)


def seq2seq(folder: Path, family: str = "t5") -> Path:
    """A tiny random encoder-decoder (``t5``, ``bart`` or ``pegasus``) and its tokenizer, saved in ``folder``."""
    import torch

    config_class, model_class = testing.seq2seq_classes(family)
    vocab_size = len(word_tokenizer(folder, family))
    torch.manual_seed(SEED)
    if family == "t5":
        settings = dict(
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
    else:
        settings = dict(
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
    model = model_class(config_class(**settings))
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
