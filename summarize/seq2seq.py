"""Abstractive answers with an encoder-decoder model (T5, BART, PEGASUS), decoded as in the paper.

The input is the selected passages' text, ``p1 p2 ... pN`` (optionally with the query in front: "wQ"), truncated
to the model's input limit. Decoding: beam search with 4 beams, no repeated trigram, early stopping, a minimum
length chosen by length calibration (``cast calibrate``), and a maximum length equal to the input's length in
tokens. Turns are decoded in batches; the maximum length is enforced per turn, so a turn's answer does not depend
on the turns it is batched with.

Decoding on a GPU is bound by per-step overheads, not arithmetic (issue 6). :class:`BeamDecoder` therefore offers,
besides transformers' plain ``generate()``, a fixed-shape KV cache (``static``) and that cache with the model's
step compiled into CUDA graphs (``compiled``), both meant to give the tokens of ``plain``: the tests check it on a
CPU, bench/generation_latency.py on any device.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cast.errors import ConfigError
from cast.records import Answer, AnswerSentence, Selection
from cast.stages import Summarizer
from summarize import no_answer
from summarize.sentences import split_sentences

if TYPE_CHECKING:
    from cast.resources import Resources

# The task prefix T5 was trained with for summarization (used when the model's config names none).
T5_PREFIX = "summarize: "
# Tokenizers without a known limit report a huge ``model_max_length``; anything above this is not a limit.
_NO_LIMIT = 1_000_000
# How the decoder's KV cache is kept (see BeamDecoder).
DECODINGS = ("plain", "static", "compiled")


def model_input(query: str, selection: Selection, *, with_query: bool, prefix: str) -> str:
    """The generator's input text: ``prefix [query] p1 p2 ... pN`` (empty when the passages have no text)."""
    passages = " ".join(text for text in (p.passage.text.strip() for p in selection.passages) if text)
    if not passages:
        return ""
    return prefix + (f"{query.strip()} {passages}" if with_query and query.strip() else passages)


def row_max_length_processor(max_lengths: Any, num_beams: int, eos_token_id: int) -> Any:
    """A logits processor that ends each row's beams at its own maximum length (decoder tokens, start included).

    At the last position a row may fill, only the end-of-sequence token is allowed, as transformers'
    ``ForcedEOSTokenLogitsProcessor`` does for the whole batch at ``max_length``. With one maximum per row, a
    batch decodes every turn exactly as it would be decoded alone.

    Args:
        max_lengths: a 1-D tensor with each row's maximum length.
        num_beams: the beams per row (scores come as ``rows * num_beams`` lines).
        eos_token_id: the end-of-sequence token.
    """
    import torch
    from transformers import LogitsProcessor

    per_beam = max_lengths.repeat_interleave(num_beams).unsqueeze(1)

    class RowMaxLength(LogitsProcessor):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            last_position = per_beam.to(scores.device) == input_ids.shape[-1] + 1
            forced = torch.full_like(scores, -float("inf"))
            forced[:, eos_token_id] = 0.0
            return torch.where(last_position, forced, scores)

    return RowMaxLength()


class BeamDecoder:
    """Beam search with ``model.generate()``, each row ending at its own maximum length, in one of three ways.

    - ``plain``: transformers' default, a KV cache that grows by one position each step.
    - ``static``: a KV cache allocated once per batch size and kept between calls, with room for
      ``max_input_tokens`` answer tokens and an input padded to ``max_input_tokens`` (an answer is never longer
      than its input); beams are reordered in place. Every call with the same number of turns then has the same
      shapes and tensor addresses. Memory: 4 x layers x rows x max_input_tokens x width values per batch size
      (keys and values, self- and cross-attention; 3.2 GB in bfloat16 for BART-large at 8 turns x 4 beams).
    - ``compiled``: ``static`` with the model's forward call compiled (``torch.compile``, mode
      ``reduce-overhead``: CUDA graphs on a GPU). ``generate()`` runs the encoder outside that call, once per
      batch, so what is compiled is the decoder step. The first call compiles (a minute or more on a CPU), as
      does the first with another batch size; on a GPU each batch size also records its CUDA graphs once.

    Padding and unused cache positions are masked, so the three compute the same scores up to the order of
    floating-point sums; tests/test_summarize_seq2seq.py (CPU) and bench/generation_latency.py (any device)
    check that the tokens are the same.

    Args:
        model: an encoder-decoder model (``AutoModelForSeq2SeqLM``); ``compiled`` compiles it in place.
        decoding: ``plain``, ``static`` or ``compiled``.
        max_input_tokens: the longest input (and so answer) in tokens; needed unless ``plain``.
    """

    def __init__(self, model: Any, decoding: str = "plain", max_input_tokens: int | None = None):
        if decoding not in DECODINGS:
            raise ConfigError(f"summarizer.decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        # transformers' flag for the models whose layers take a static cache and compile into one graph.
        if decoding != "plain" and not getattr(model, "_can_compile_fullgraph", False):
            raise ConfigError(
                f"summarizer.decoding {decoding!r} needs a model that decodes with a static KV cache, and "
                f"{type(model).__name__} does not: use decoding: plain"
            )
        if decoding != "plain" and not max_input_tokens:
            raise ConfigError(
                f"summarizer.decoding {decoding!r} needs the model's input limit (max_input_tokens)"
            )
        self.model = model
        self.decoding = decoding
        self.max_input_tokens = max_input_tokens
        self.eos_token_id = first_id(model.generation_config.eos_token_id)
        pad_token_id = first_id(model.generation_config.pad_token_id)
        self.pad_token_id = 0 if pad_token_id is None else pad_token_id  # any id: padding is masked
        self._caches: dict[int, Any] = {}  # rows (turns x beams) -> the cache kept for them
        if decoding == "compiled":
            model.compile(mode="reduce-overhead")

    def __call__(
        self, input_ids: Any, attention_mask: Any, max_lengths: Any, num_beams: int, **settings: Any
    ) -> Any:
        """The generated ids (rows x tokens) for right-padded inputs.

        Args:
            max_lengths: a 1-D tensor with each row's maximum length in decoder tokens (start included).
            settings: further ``generate()`` settings: ``no_repeat_ngram_size``, ``early_stopping``,
                ``min_length``...
        """
        import torch
        from transformers import LogitsProcessorList

        max_length = int(max_lengths.max())
        cap = row_max_length_processor(max_lengths, num_beams, self.eos_token_id)
        if self.decoding != "plain":
            if max_length > self.max_input_tokens or input_ids.shape[1] > self.max_input_tokens:
                raise ValueError(f"inputs and answers must fit in max_input_tokens={self.max_input_tokens}")
            padding = (0, self.max_input_tokens - input_ids.shape[1])
            input_ids = torch.nn.functional.pad(input_ids, padding, value=self.pad_token_id)
            attention_mask = torch.nn.functional.pad(attention_mask, padding, value=0)
            settings["past_key_values"] = self._cache(input_ids.shape[0] * num_beams)
        with torch.inference_mode():
            return self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                num_beams=num_beams,
                max_length=max_length,
                logits_processor=LogitsProcessorList([cap]),
                **settings,
            )

    def _cache(self, rows: int) -> Any:
        """The cache for ``rows`` beams, emptied; made on first use (same object, same addresses after)."""
        if rows not in self._caches:
            self._caches[rows] = static_cache(self.model, rows, self.max_input_tokens, self.max_input_tokens)
        else:
            self._caches[rows].reset()
        return self._caches[rows]


def static_cache(model: Any, rows: int, answer_length: int, input_length: int) -> Any:
    """An encoder-decoder KV cache allocated up front: ``answer_length`` positions of self-attention and
    ``input_length`` of cross-attention, for ``rows`` beams (transformers' ``StaticCache`` for each)."""
    from transformers import StaticCache
    from transformers.configuration_utils import get_head_shapes

    num_heads, head_dim = get_head_shapes(model.config.get_text_config(decoder=True))
    halves = [
        StaticCache(config=model.config, max_cache_len=length) for length in (answer_length, input_length)
    ]
    for half in halves:
        half.early_initialization(rows, num_heads, head_dim, model.dtype, model.device)
    return _in_place_beam_cache()(*halves)


@functools.cache
def _in_place_beam_cache() -> type:
    """The cache class (made once: a compiled step is specialised on its type)."""
    from transformers import EncoderDecoderCache

    class InPlaceBeamCache(EncoderDecoderCache):
        """Reorders beams by copying into its own tensors (transformers' cache makes new ones), so they keep
        the addresses that CUDA graphs replay from. The cross-attention half is never reordered: beam search
        moves beams only within a turn, and all beams of a turn hold the same encoder states."""

        def reorder_cache(self, beam_idx: Any) -> None:
            for layer in self.self_attention_cache.layers:
                layer.keys.copy_(layer.keys.index_select(0, beam_idx))
                layer.values.copy_(layer.values.index_select(0, beam_idx))

    return InPlaceBeamCache


def first_id(token_id: int | list[int] | None) -> int | None:
    """A token id from a generation config's setting, which may list several (the first is the main one)."""
    return token_id[0] if isinstance(token_id, list) else token_id


class Seq2SeqSummarizer(Summarizer):
    """Answers written by a sequence-to-sequence model from the selected passages.

    Args:
        model: a Hugging Face model id (in the local cache) or a local folder: ``t5-base``,
            ``facebook/bart-large-cnn``, ``google/pegasus-cnn_dailymail``.
        min_length: the minimum answer length in decoder tokens (set by ``cast calibrate``).
        num_beams: beams of the beam search.
        no_repeat_ngram_size: no n-gram of this size appears twice in an answer.
        early_stopping: stop a turn's search as soon as ``num_beams`` answers are complete.
        with_query: put the query in front of the passages ("wQ").
        prefix: text put in front of the input; by default the model's own summarization prefix
            (``summarize: `` for T5), else none.
        max_input_tokens: the input limit in tokens; by default the model's (512 for T5, 1024 for BART/PEGASUS).
        batch_size: turns decoded together.
        device: ``auto``, ``cpu``, ``cuda``...; by default the pipeline's ``device``.
        dtype: ``auto`` (float32 on CPU, bfloat16 on a GPU), ``float32``, ``float16`` or ``bfloat16``.
        decoding: ``plain`` (transformers' ``generate()`` as is), ``static`` (a fixed-shape KV cache) or
            ``compiled`` (that cache with the decoder step compiled into CUDA graphs: for a GPU); the same
            answers, see :class:`BeamDecoder`.
        allow_download: let transformers fetch the model if it is not available locally.
    """

    def __init__(
        self,
        model: str = "facebook/bart-large-cnn",
        min_length: int = 0,
        num_beams: int = 4,
        no_repeat_ngram_size: int = 3,
        early_stopping: bool = True,
        with_query: bool = False,
        prefix: str | None = None,
        max_input_tokens: int | None = None,
        batch_size: int = 8,
        device: str | None = None,
        dtype: str = "auto",
        decoding: str = "plain",
        allow_download: bool = False,
        resources: Resources | None = None,
    ):
        from cast.models import load_seq2seq, load_tokenizer, resolve_device

        for key, value, least in (
            ("min_length", min_length, 0),
            ("num_beams", num_beams, 1),
            ("batch_size", batch_size, 1),
        ):
            if not isinstance(value, int) or value < least:
                raise ConfigError(f"summarizer.{key} must be an integer of at least {least}, got {value!r}")
        if max_input_tokens is not None and (not isinstance(max_input_tokens, int) or max_input_tokens < 1):
            raise ConfigError(
                f"summarizer.max_input_tokens must be a positive integer, got {max_input_tokens!r}"
            )
        self.model_name = model
        self.min_length = min_length
        self.num_beams = num_beams
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self.early_stopping = early_stopping
        self.with_query = with_query
        self.batch_size = batch_size
        if device is None:
            device = resources.device if resources is not None else "auto"
        self.device = resolve_device(device)
        self.tokenizer = load_tokenizer(model, allow_download=allow_download)
        self.model = load_seq2seq(model, self.device, dtype, allow_download=allow_download)
        self.prefix = default_prefix(self.model.config) if prefix is None else prefix
        self.max_input_tokens = max_input_tokens or input_limit(self.tokenizer, self.model.config, model)
        self.decoder = BeamDecoder(self.model, decoding, self.max_input_tokens)
        self.eos_token_id = self.decoder.eos_token_id

    @property
    def generator(self) -> str:
        """The name answers record: the stage and its model."""
        return f"{self.name}:{self.model_name}"

    def with_min_length(self, min_length: int) -> Seq2SeqSummarizer:
        """The same summarizer (sharing the loaded model) with another minimum length, for calibration."""
        if min_length < 0:
            raise ConfigError(f"min_length must be at least 0, got {min_length}")
        other = copy.copy(self)
        other.min_length = min_length
        return other

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model_name,
            "num_beams": self.num_beams,
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "early_stopping": self.early_stopping,
            "min_length": self.min_length,
            "max_length": "input length",
            "length_penalty": self.model.generation_config.length_penalty,
            "with_query": self.with_query,
            "prefix": self.prefix,
            "max_input_tokens": self.max_input_tokens,
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "decoding": self.decoder.decoding,
        }

    def summarize(self, query: str, selection: Selection) -> Answer:
        return self.summarize_batch([(query, selection)])[0]

    def summarize_batch(self, items: Sequence[tuple[str, Selection]]) -> list[Answer]:
        from tqdm import tqdm

        texts = [model_input(q, s, with_query=self.with_query, prefix=self.prefix) for q, s in items]
        answers: list[Answer | None] = [None] * len(items)
        # Longest first, so that each batch pads little.
        todo = sorted((i for i, t in enumerate(texts) if t), key=lambda i: -len(texts[i]))
        batches = [todo[k : k + self.batch_size] for k in range(0, len(todo), self.batch_size)]
        for batch in tqdm(batches, desc="answers", unit="batch", disable=len(batches) < 4, leave=False):
            generated = self.generate([texts[i] for i in batch])
            for i, (text, max_length) in zip(batch, generated, strict=True):
                answers[i] = self._answer(text, items[i][1], max_length)
        for i, (_, selection) in enumerate(items):
            if answers[i] is None:
                answers[i] = no_answer(
                    self, tuple(p.id for p in selection.passages), generator=self.generator
                )
        return answers

    def generate(self, texts: Sequence[str]) -> list[tuple[str, int]]:
        """Decode ``texts`` together; returns each answer and the maximum length it was decoded with."""
        encoded = self.tokenizer(
            list(texts), truncation=True, max_length=self.max_input_tokens, padding=True, return_tensors="pt"
        ).to(self.device)
        max_lengths = encoded["attention_mask"].sum(dim=1)
        output = self.decoder(
            encoded["input_ids"],
            encoded["attention_mask"],
            max_lengths,
            num_beams=self.num_beams,
            no_repeat_ngram_size=self.no_repeat_ngram_size,
            early_stopping=self.early_stopping,
            min_length=self.min_length,
        )
        decoded = self.tokenizer.batch_decode(output, skip_special_tokens=True)
        return [(text.strip(), int(n)) for text, n in zip(decoded, max_lengths, strict=True)]

    def _answer(self, text: str, selection: Selection, max_length: int) -> Answer:
        source_ids = tuple(p.id for p in selection.passages)
        if not text:
            return no_answer(self, source_ids, "the model generated no text", generator=self.generator)
        return Answer(
            text=text,
            source_ids=source_ids,
            generator=self.generator,
            sentences=tuple(AnswerSentence(s.text, None) for s in split_sentences(text)),
            settings={**self.describe(), "max_length": max_length},
        )


def default_prefix(config: Any) -> str:
    """The model's summarization prefix: from its config's task parameters, else ``summarize: `` for T5."""
    task = (getattr(config, "task_specific_params", None) or {}).get("summarization", {})
    if "prefix" in task:
        return task["prefix"]
    return T5_PREFIX if config.model_type in ("t5", "mt5") else ""


def input_limit(tokenizer: Any, config: Any, model: str) -> int:
    """The longest input the model reads, in tokens: the tokenizer's limit or the model's position table."""
    limits = [tokenizer.model_max_length] if tokenizer.model_max_length < _NO_LIMIT else []
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        limits.append(positions)
    if not limits:
        raise ConfigError(
            f"model {model!r} states no input limit: set summarizer.max_input_tokens (e.g. 512)"
        )
    return min(limits)
