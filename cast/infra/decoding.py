"""Beam search for encoder-decoder models (the T5 rewriter, the seq2seq summarizers), four ways that give the
same tokens.

Decoding on a GPU is bound by per-step overheads, not arithmetic. :class:`BeamDecoder` therefore offers,
besides transformers' plain ``generate()``, a fixed-shape KV cache (``static``), that cache with the model's
step compiled into CUDA graphs (``compiled``), and, for BART, the whole step (decoder, logits processors, beam
bookkeeping) recorded as one CUDA graph (``graphed``: :mod:`cast.infra.graphed_beam`), all meant to give the
tokens of ``plain``: the tests check it on a CPU, bench/generation_latency.py and bench/latency.py on any device.
"""

from __future__ import annotations

import functools
import typing
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.settings import Runtime
from cast.errors import ConfigError
from cast.infra.graphed_beam import GraphedBeamSearch, check_graphable

# How the decoder's KV cache is kept (see BeamDecoder).
# The setting of the stages that decode with a beam search (the T5 rewriter, the seq2seq summarizer).
Decoding = Annotated[
    Literal["plain", "static", "graphed", "compiled"],
    Field(
        description="``plain`` (transformers' ``generate()`` as is), ``static`` (a fixed-shape KV cache), "
        "``compiled`` (that cache with the decoder step compiled into CUDA graphs: for a GPU) or ``graphed`` "
        "(BART: the whole beam-search step as one CUDA graph, no compilation); the same tokens, see "
        ":class:`cast.infra.decoding.BeamDecoder`."
    ),
    Runtime(),
]
DECODINGS: tuple[str, ...] = typing.get_args(typing.get_args(Decoding)[0])


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
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            last_position = per_beam.to(scores.device) == input_ids.shape[-1] + 1
            forced = torch.full_like(scores, -float("inf"))
            forced[:, eos_token_id] = 0.0
            return torch.where(last_position, forced, scores)

    return RowMaxLength()


class BeamDecoder:
    """Beam search in one of four ways that give the same tokens.

    - ``plain``: transformers' default, a KV cache that grows by one position each step.
    - ``static``: a KV cache allocated once per batch size and kept between calls, with room for
      ``max_output_tokens`` generated tokens and an input padded to ``max_input_tokens``; beams are reordered in
      place. Every call with the same number of rows then has the same shapes and tensor addresses. Memory:
      2 x layers x rows x (max_input_tokens + max_output_tokens) x width values per batch size (keys and
      values, self- and cross-attention; 3.2 GB in bfloat16 for BART-large at 8 turns x 4 beams, 1024 + 1024).
    - ``compiled``: ``static`` with the model's forward call compiled (``torch.compile``, mode
      ``reduce-overhead``: CUDA graphs on a GPU). ``generate()`` runs the encoder outside that call, once per
      batch, so what is compiled is the decoder step. The first call compiles (a minute or more on a CPU), as
      does the first with another batch size; on a GPU each batch size also records its CUDA graphs once.
    - ``graphed`` (BART models): :class:`cast.infra.graphed_beam.GraphedBeamSearch`, transformers' beam search
      and logits processors re-expressed over fixed-shape buffers, each step one CUDA graph replay on a GPU
      (recorded on the first call with a batch size, in about a second: nothing is compiled).

    Padding and unused cache positions are masked, so the three compute the same scores up to the order of
    floating-point sums; tests/integration/test_summarize_seq2seq.py and tests/integration/test_rewrite_t5.py
    (CPU), bench/generation_latency.py and bench/latency.py (any device) check that the tokens are the same.

    Args:
        model: an encoder-decoder model (``AutoModelForSeq2SeqLM``); ``compiled`` compiles it in place.
        decoding: ``plain``, ``static`` or ``compiled``.
        max_input_tokens: the longest input in tokens; needed unless ``plain``.
        max_output_tokens: the longest output in tokens (start token included); by default ``max_input_tokens``
            (a summary is never longer than its input).
        setting: the config setting that chose ``decoding``, named in errors.
    """

    def __init__(
        self,
        model: Any,
        decoding: str = "plain",
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        setting: str = "decoding",
    ):
        if decoding not in DECODINGS:
            raise ConfigError(f"{setting} must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        # transformers' flag for the models whose layers take a static cache and compile into one graph.
        if decoding == "graphed":
            check_graphable(model, setting)
        elif decoding != "plain" and not getattr(model, "_can_compile_fullgraph", False):
            raise ConfigError(
                f"{setting} {decoding!r} needs a model that decodes with a static KV cache, and "
                f"{type(model).__name__} does not: use decoding: plain"
            )
        if decoding != "plain" and not max_input_tokens:
            raise ConfigError(f"{setting} {decoding!r} needs the model's input limit (max_input_tokens)")
        self.model = model
        self.decoding = decoding
        # Only static-cache decodings read the limits, and they were checked above: 0 stands for "none" in plain.
        self.max_input_tokens: int = max_input_tokens or 0
        self.max_output_tokens: int = max_output_tokens or self.max_input_tokens
        self.eos_token_id = first_id(model.generation_config.eos_token_id)
        pad_token_id = first_id(model.generation_config.pad_token_id)
        self.pad_token_id = 0 if pad_token_id is None else pad_token_id  # any id: padding is masked
        self._caches: dict[int, Any] = {}  # rows (inputs x beams) -> the cache kept for them
        if decoding == "compiled":
            model.compile(mode="reduce-overhead")
        self._graphed = (
            GraphedBeamSearch(model, self.max_input_tokens, self.max_output_tokens)
            if decoding == "graphed"
            else None
        )

    def __call__(
        self, input_ids: Any, attention_mask: Any, max_lengths: Any, num_beams: int, **settings: Any
    ) -> Any:
        """The generated ids (rows x tokens) for right-padded inputs.

        Args:
            max_lengths: the maximum output length in tokens (start included): one for all rows (an int), or a
                1-D tensor with each row's own (:func:`row_max_length_processor` ends each row there).
            settings: further ``generate()`` settings: ``no_repeat_ngram_size``, ``early_stopping``,
                ``min_length``...
        """
        import torch
        from transformers import LogitsProcessorList

        if self._graphed is not None:
            return self._graphed(input_ids, attention_mask, max_lengths, num_beams=num_beams, **settings)
        if isinstance(max_lengths, int):
            max_length, processors = max_lengths, []
        else:
            max_length = int(max_lengths.max())
            if self.eos_token_id is None:
                raise ValueError("rows of their own length need the model's end-of-sequence token")
            processors = [row_max_length_processor(max_lengths, num_beams, self.eos_token_id)]
        if self.decoding != "plain":
            if max_length > self.max_output_tokens or input_ids.shape[1] > self.max_input_tokens:
                raise ValueError(
                    f"inputs must fit in max_input_tokens={self.max_input_tokens} and outputs in "
                    f"max_output_tokens={self.max_output_tokens}"
                )
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
                logits_processor=LogitsProcessorList(processors),
                **settings,
            )

    def _cache(self, rows: int) -> Any:
        """The cache for ``rows`` beams, emptied; made on first use (same object, same addresses after)."""
        if rows not in self._caches:
            self._caches[rows] = static_cache(self.model, rows, self.max_output_tokens, self.max_input_tokens)
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
            layers: list[Any] = self.self_attention_cache.layers  # static layers: keys and values are tensors
            for layer in layers:
                layer.keys.copy_(layer.keys.index_select(0, beam_idx))
                layer.values.copy_(layer.values.index_select(0, beam_idx))

    return InPlaceBeamCache


def first_id(token_id: int | list[int] | None) -> int | None:
    """A token id from a generation config's setting, which may list several (the first is the main one)."""
    return token_id[0] if isinstance(token_id, list) else token_id
