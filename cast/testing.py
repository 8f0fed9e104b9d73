"""Building blocks for tiny or randomly initialised Hugging Face models, made locally (never downloaded).

The tests build tiny models with them (``tests/tiny_models.py``) and the benchmarks build models of the published
shapes with random weights (``bench/latency.py``, ``bench/generation_latency.py``), so both exercise the real
loading, batching, ``generate()`` and scoring code without a checkpoint. A chat model of either kind can be served
by a real OpenAI-compatible engine, transformers' own ``transformers serve``
(:class:`cast.infra.engine.ServedModel`): the tests and ``bench/llm.py --engine`` ask it as they would any server.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The architectures of t5-base, facebook/bart-large-cnn and google/pegasus-cnn_dailymail (from their configs).
PUBLISHED_SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "t5-base": (
        "t5",
        dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12,
             pad_token_id=0, eos_token_id=1, decoder_start_token_id=0),
    ),
    "bart-large": (
        "bart",
        dict(vocab_size=50264, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
             decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024,
             bos_token_id=0, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_bos_token_id=0,
             forced_eos_token_id=2),
    ),
    "pegasus-large": (
        "pegasus",
        dict(vocab_size=96103, d_model=1024, encoder_layers=16, decoder_layers=16, encoder_attention_heads=16,
             decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024,
             pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, forced_eos_token_id=1),
    ),
}  # fmt: skip

# Decoder-only chat models: a tiny one for the tests, and the architectures of HuggingFaceTB/SmolLM2-135M-Instruct,
# Qwen/Qwen2.5-7B-Instruct and meta-llama/Llama-3.1-8B-Instruct (from their configs) for timing an engine.
CHAT_SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "tiny": ("llama", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=4)),
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0,
                                   tie_word_embeddings=True)),
    "qwen2.5-7b": ("qwen2", dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                 num_attention_heads=28, num_key_value_heads=4, rope_theta=1000000.0)),
    "llama-3.1-8b": ("llama", dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0)),
}  # fmt: skip

SPECIALS = {"t5": ["<pad>", "</s>", "<unk>"], "bart": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]}


def word_tokenizer(folder: Path, family: str, words: Iterable[str]) -> Any:
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


def seq2seq_classes(family: str) -> tuple[Any, Any]:
    """The ``(config class, model class)`` of an encoder-decoder family: ``t5``, ``bart`` or ``pegasus``."""
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        PegasusConfig,
        PegasusForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
    )

    classes = {
        "t5": (T5Config, T5ForConditionalGeneration),
        "bart": (BartConfig, BartForConditionalGeneration),
        "pegasus": (PegasusConfig, PegasusForConditionalGeneration),
    }
    if family not in classes:
        raise ValueError(f"unknown seq2seq family {family!r}: use t5, bart or pegasus")
    return classes[family]


def published_shape_model(shape: str) -> Any:
    """A randomly initialised encoder-decoder of a published shape (a key of :data:`PUBLISHED_SHAPES`)."""
    family, settings = PUBLISHED_SHAPES[shape]
    config_class, model_class = seq2seq_classes(family)
    return model_class(config_class(**settings))


def random_weights_like(source: Path, folder: Path) -> Path:
    """A copy of the sentence-transformers (or Hugging Face) model folder ``source`` in ``folder`` with random
    weights of the same shape: what a machine without the weights times instead (a rate does not depend on the
    weights). ``source`` needs its configuration and tokenizer files, not its weights."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModel

    weights = {"model.safetensors", "pytorch_model.bin"}
    shutil.copytree(source, folder, ignore=lambda _, names: [n for n in names if n in weights or n == "onnx"])
    torch.manual_seed(1234)
    AutoModel.from_config(AutoConfig.from_pretrained(str(source))).save_pretrained(str(folder))
    return folder


def chat_model(
    folder: Path, words: Iterable[str], shape: str = "tiny", dtype: str = "float32", device: str = "cpu"
) -> Path:
    """A randomly initialised decoder-only chat model of ``shape`` (a key of :data:`CHAT_SHAPES`) with a word
    tokenizer over ``words`` and a chat template, made on ``device`` and saved in ``folder`` for an engine to
    serve."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    family, settings = CHAT_SHAPES[shape]
    tokenizer = word_tokenizer(folder, "bart", [*words, "system", "user", "assistant", ":"])
    tokenizer.model_max_length = 4096  # the LLM stages' prompts hold whole passages
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}assistant :{% endif %}"
    )
    tokenizer.save_pretrained(str(folder))
    config_class, model_class = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[family]
    config = config_class(
        **{"vocab_size": len(tokenizer), **settings},
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(1234)
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # made in its dtype: an 8B model twice over would not fit
    try:
        with torch.device(device):
            model = model_class(config)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(str(folder))
    return folder
