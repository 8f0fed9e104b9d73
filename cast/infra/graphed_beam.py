"""Beam search for BART-family models with the whole step on the device: the ``graphed`` decoding.

transformers' ``generate()`` spends most of a BART-large step on the host: the decoder's module calls, the mask
built anew each step, the logits processors, the beam bookkeeping and the stopping check (a device wait per step).
On a GPU the arithmetic of one step for 4 beams takes well under a millisecond; the host takes several. Here one
step is a fixed sequence of tensor operations over fixed-shape buffers: the decoder (the model's own layers, with
a self-attention cache of ``max_output_tokens`` positions and the cross-attention keys and values computed once),
the logits processors ``generate()`` would apply (no repeated n-gram, minimum length, forced first and last
tokens, each row's own maximum length), and transformers' vectorised beam search (its ``_beam_search``, step for
step, the same operations on the same values). On a GPU that step is recorded once as a CUDA graph and replayed;
the host looks at the stopping flag every few steps, and a step after the search has stopped changes nothing.
On a CPU the same step runs as it is, which is how the tests check it against ``generate()``.

The tokens are ``plain``'s up to the order of floating-point sums in attention (unused cache positions are
masked): bench/generation_latency.py checks them on the device it runs on.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from cast.errors import ConfigError

# Checked in the generation config: anything but these values needs a processor this search does not apply.
_UNSUPPORTED_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "do_sample": (False, None),
    "num_return_sequences": (1, None),
    "num_beam_groups": (1, None),
    "repetition_penalty": (1.0, None),
    "encoder_repetition_penalty": (1.0, None),
    "encoder_no_repeat_ngram_size": (0, None),
    "bad_words_ids": (None,),
    "sequence_bias": (None,),
    "min_new_tokens": (0, None),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "exponential_decay_length_penalty": (None,),
    "remove_invalid_values": (False, None),
    "guidance_scale": (1.0, None),
    "max_new_tokens": (None,),
}
# How often (steps) the host reads the stopping flag: each read waits for the device.
_CHECK_EVERY = 8
# Buffer lengths are multiples of these (tokens); searches (buffers and graph) of this many shapes are kept.
_INPUT_STEP, _OUTPUT_STEP, _SEARCHES_KEPT = 64, 32, 4


def check_graphable(model: Any, setting: str) -> None:
    """A :class:`ConfigError` unless ``model`` is one this search decodes (BART's post-norm layers)."""
    config = model.config
    if config.model_type != "bart":
        raise ConfigError(
            f"{setting} 'graphed' decodes BART models (facebook/bart-large-cnn...), not {config.model_type}: use "
            "decoding: compiled or plain"
        )


@dataclass(frozen=True)
class SearchSettings:
    """The generation settings the step applies, resolved from the model's generation config and the call's."""

    num_beams: int
    no_repeat_ngram_size: int
    min_length: int
    length_penalty: float
    early_stopping: bool | str
    eos_token_ids: tuple[int, ...]
    pad_token_id: int | None
    decoder_start_token_id: int
    forced_bos_token_id: int | None
    forced_eos_token_ids: tuple[int, ...] | None

    @classmethod
    def resolve(cls, model: Any, settings: dict[str, Any]) -> SearchSettings:
        """The settings ``generate(**settings)`` would decode with; a ``ValueError`` for any it would apply
        that this search does not."""
        config = copy.deepcopy(model.generation_config)
        unused = config.update(**settings)
        if unused:
            raise ValueError(f"graphed decoding does not take {', '.join(sorted(unused))}")
        for name, defaults in _UNSUPPORTED_DEFAULTS.items():
            if getattr(config, name, None) not in defaults:
                raise ValueError(f"graphed decoding does not apply {name}={getattr(config, name)!r}")
        if config.eos_token_id is None:
            raise ValueError("graphed decoding needs the model's end-of-sequence token")
        start = config.decoder_start_token_id
        if start is None:
            start = model.config.decoder_start_token_id
        return cls(
            num_beams=config.num_beams,
            no_repeat_ngram_size=config.no_repeat_ngram_size or 0,
            min_length=config.min_length or 0,
            length_penalty=1.0 if config.length_penalty is None else float(config.length_penalty),
            early_stopping=config.early_stopping,
            eos_token_ids=_ids(config.eos_token_id),
            pad_token_id=config.pad_token_id,
            decoder_start_token_id=_ids(start)[0],
            forced_bos_token_id=config.forced_bos_token_id,
            forced_eos_token_ids=None
            if config.forced_eos_token_id is None
            else _ids(config.forced_eos_token_id),
        )


def _ids(value: int | list[int]) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


class GraphedBeamSearch:
    """Beam search for a BART model over fixed-shape buffers, one CUDA graph per step on a GPU (module docstring).

    Args:
        model: a ``BartForConditionalGeneration`` in eval mode.
        max_input_tokens: the longest input in tokens (an input is padded to a multiple of 64 tokens, up to this).
        max_output_tokens: the longest output in tokens, start token included (the self-attention cache holds a
            call's maximum length rounded up to a multiple of 32, up to this).
    """

    def __init__(self, model: Any, max_input_tokens: int, max_output_tokens: int):
        self.model = model
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self._searches: dict[tuple[Any, ...], _Search] = {}  # by shape, least recently used first

    def __call__(self, input_ids: Any, attention_mask: Any, max_lengths: Any, **settings: Any) -> Any:
        """The generated ids (rows x tokens) of right-padded inputs, as ``generate()`` returns them.

        Args:
            max_lengths: the maximum output length in tokens, start included: one for all rows (an int), or a
                1-D tensor with each row's own (each row's beams end there, as
                :func:`cast.infra.decoding.row_max_length_processor` ends them).
            settings: ``generate()`` settings (``num_beams``, ``no_repeat_ngram_size``, ``min_length``...).
        """
        import torch

        resolved = SearchSettings.resolve(self.model, settings)
        rows = input_ids.shape[0]
        if isinstance(max_lengths, int):  # no row of its own length: no row's last position is forced
            max_length, row_max_lengths = max_lengths, torch.full((rows,), -1)
        else:
            max_length, row_max_lengths = int(max_lengths.max()), max_lengths
        if max_length > self.max_output_tokens or input_ids.shape[1] > self.max_input_tokens:
            raise ValueError(
                f"inputs must fit in max_input_tokens={self.max_input_tokens} and outputs in "
                f"max_output_tokens={self.max_output_tokens}"
            )
        # Buffers as long as this call needs, in steps (a few shapes, each recorded once): attention reads every
        # position of its buffer, masked or not.
        input_length = min(self.max_input_tokens, _round_up(input_ids.shape[1], _INPUT_STEP))
        output_length = min(self.max_output_tokens, _round_up(max_length, _OUTPUT_STEP))
        padding = (0, input_length - input_ids.shape[1])
        input_ids = torch.nn.functional.pad(input_ids, padding, value=resolved.pad_token_id or 0)
        attention_mask = torch.nn.functional.pad(attention_mask, padding, value=0)
        key = (rows, resolved, input_length, output_length)
        search = self._searches.pop(key, None) or _Search(
            self.model, rows, resolved, input_length, output_length
        )
        self._searches[key] = search  # the most recent last; the least recently used goes first
        while len(self._searches) > _SEARCHES_KEPT:
            self._searches.pop(next(iter(self._searches)))
        with torch.inference_mode():
            return search.run(input_ids, attention_mask, max_length, row_max_lengths.to(input_ids.device))


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


class _Search:
    """The buffers, the step and (on a GPU) its graph for one batch size and one set of settings."""

    def __init__(
        self, model: Any, batch: int, settings: SearchSettings, input_length: int, output_length: int
    ):
        import torch

        self.model = model
        self.decoder = model.get_decoder()
        self.settings = settings
        self.device = model.device
        self.batch, self.beams = batch, settings.num_beams
        rows = batch * settings.num_beams
        config = model.config
        heads = config.decoder_attention_heads
        head_dim = config.d_model // heads
        self.layers = len(self.decoder.layers)
        dtype, device = model.dtype, self.device
        with torch.inference_mode():

            def zeros(*shape: int, kind: Any = dtype) -> Any:
                return torch.zeros(shape, dtype=kind, device=device)

            self.self_keys = [zeros(rows, heads, output_length, head_dim) for _ in range(self.layers)]
            self.self_values = [zeros(rows, heads, output_length, head_dim) for _ in range(self.layers)]
            self.cross_keys = [zeros(rows, heads, input_length, head_dim) for _ in range(self.layers)]
            self.cross_values = [zeros(rows, heads, input_length, head_dim) for _ in range(self.layers)]
            self.cross_mask = zeros(rows, 1, 1, input_length, kind=torch.bool)
            self.positions = torch.arange(output_length, device=device)
            self.vocabulary = torch.arange(config.vocab_size, device=device)
            self.eos = torch.tensor(settings.eos_token_ids, device=device)
            forced_eos = settings.forced_eos_token_ids or ()
            self.forced_eos = torch.tensor(forced_eos, dtype=torch.long, device=device)
            # The length penalty's divisor for each length, as the device divides by a Python number: a CUDA
            # kernel multiplies by the float32 reciprocal, a CPU one divides (transformers divides by ``n ** lp``).
            divisors = [float(max(n, 1) ** settings.length_penalty) for n in range(output_length + 1)]
            self.divisors = torch.tensor(divisors, dtype=torch.float32, device=device)
            self.reciprocals = 1.0 / self.divisors.cpu()
            self.reciprocals = self.reciprocals.to(device)
            beams_to_keep = max(2, 1 + len(settings.eos_token_ids)) * self.beams
            self.beams_to_keep = beams_to_keep
            self.top_num_beam_mask = torch.cat(
                (
                    torch.ones(self.beams, dtype=torch.bool),
                    torch.zeros(beams_to_keep - self.beams, dtype=torch.bool),
                )
            ).to(device)
            self.batch_offset = torch.arange(batch, device=device).view(-1, 1) * self.beams
            long = torch.long
            self.state = {
                "running_sequences": zeros(batch, self.beams, output_length, kind=long),
                "sequences": zeros(batch, self.beams, output_length, kind=long),
                "running_beam_scores": zeros(batch, self.beams, kind=torch.float32),
                "beam_scores": zeros(batch, self.beams, kind=torch.float32),
                "is_sent_finished": zeros(batch, self.beams, kind=torch.bool),
                "lengths": zeros(batch, self.beams, kind=long),
                "unsatisfied": zeros(batch, 1, kind=torch.bool),
                "unfinished": zeros(kind=torch.bool),
                "cur_len": zeros(kind=long),
                "max_length": zeros(kind=long),
                "row_max_lengths": zeros(rows, 1, kind=long),
            }
        self.graph: Any = None

    def run(self, input_ids: Any, attention_mask: Any, max_length: int, row_max_lengths: Any) -> Any:
        """The search for one batch: ``generate()``'s output ids."""
        on_gpu = self.device.type == "cuda"
        if on_gpu and self.graph is None:
            self._start(input_ids, attention_mask, max_length, row_max_lengths)
            self.graph = self._record()
        self._start(input_ids, attention_mask, max_length, row_max_lengths)
        unfinished = self.state["unfinished"]
        # transformers' loop runs at most max_length - 1 steps; a step after it would have stopped is a no-op.
        for step in range(max_length - 1):
            if on_gpu:
                self.graph.replay()
            else:
                self._step()
            if (step + 1) % (_CHECK_EVERY if on_gpu else 1) == 0 and not bool(unfinished):
                break
        sequences, lengths = self.state["sequences"][:, 0], self.state["lengths"][:, 0]
        return sequences[:, : 1 + int(lengths.max())].clone()

    def _record(self) -> Any:
        """The step as a CUDA graph, after two warm-up steps on a side stream (the state is reset afterwards)."""
        import torch

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step()
        return graph

    def _start(self, input_ids: Any, attention_mask: Any, max_length: int, row_max_lengths: Any) -> None:
        """Runs the encoder, fills the cross-attention buffers and resets the search state."""
        settings, state = self.settings, self.state
        encoder_states = self.model.get_encoder()(
            input_ids=input_ids, attention_mask=attention_mask, return_dict=True
        ).last_hidden_state
        encoder_states = encoder_states.repeat_interleave(self.beams, dim=0)
        self.cross_mask.copy_(attention_mask.repeat_interleave(self.beams, dim=0).bool()[:, None, None, :])
        for layer, keys, values in zip(self.decoder.layers, self.cross_keys, self.cross_values, strict=True):
            attention = layer.encoder_attn
            keys.copy_(self._heads(attention.k_proj(encoder_states), keys.shape[-1]))
            values.copy_(self._heads(attention.v_proj(encoder_states), values.shape[-1]))
        pad, eos = settings.pad_token_id, settings.eos_token_ids
        fill = pad if pad else eos[0]  # transformers: ``pad_token_id or eos_token_id[0]``
        state["running_sequences"].fill_(fill)
        state["running_sequences"][:, :, 0] = settings.decoder_start_token_id
        state["sequences"].copy_(state["running_sequences"])
        state["running_beam_scores"].zero_()
        state["running_beam_scores"][:, 1:] = -1e9
        state["beam_scores"].fill_(-1e9)
        state["is_sent_finished"].zero_()
        state["lengths"].zero_()
        state["unsatisfied"].fill_(True)
        state["unfinished"].fill_(True)
        state["cur_len"].fill_(1)
        state["max_length"].fill_(max_length)
        state["row_max_lengths"].copy_(row_max_lengths.repeat_interleave(self.beams).view(-1, 1))

    @staticmethod
    def _heads(projected: Any, head_dim: int) -> Any:
        """``[rows, length, width]`` -> ``[rows, heads, length, head_dim]``."""
        return projected.view(*projected.shape[:2], -1, head_dim).transpose(1, 2)

    def _logits(self, tokens: Any, position: Any) -> Any:
        """The float32 next-token logits of each beam, after writing its ``tokens`` (at ``position``) into the
        self-attention cache: BART's decoder layers (post-norm), read through the model's own modules."""
        import torch

        decoder = self.decoder
        functional = torch.nn.functional
        hidden = decoder.embed_tokens(tokens)
        # The learned positions are offset by 2 (transformers' BartLearnedPositionalEmbedding).
        hidden = hidden + functional.embedding(
            (position + decoder.embed_positions.offset).view(1, 1), decoder.embed_positions.weight
        )
        hidden = decoder.layernorm_embedding(hidden)
        visible = (self.positions <= position).view(1, 1, 1, -1)
        rows = tokens.shape[0]
        for index, layer in enumerate(decoder.layers):
            attention = layer.self_attn
            head_dim = attention.head_dim
            query = self._heads(attention.q_proj(hidden), head_dim)
            self.self_keys[index].index_copy_(
                2, position.view(1), self._heads(attention.k_proj(hidden), head_dim)
            )
            self.self_values[index].index_copy_(
                2, position.view(1), self._heads(attention.v_proj(hidden), head_dim)
            )
            attended = functional.scaled_dot_product_attention(
                query,
                self.self_keys[index],
                self.self_values[index],
                attn_mask=visible,
                scale=attention.scaling,
            )
            hidden = layer.self_attn_layer_norm(
                hidden + attention.out_proj(attended.transpose(1, 2).reshape(rows, 1, -1))
            )
            attention = layer.encoder_attn
            query = self._heads(attention.q_proj(hidden), head_dim)
            attended = functional.scaled_dot_product_attention(
                query,
                self.cross_keys[index],
                self.cross_values[index],
                attn_mask=self.cross_mask,
                scale=attention.scaling,
            )
            hidden = layer.encoder_attn_layer_norm(
                hidden + attention.out_proj(attended.transpose(1, 2).reshape(rows, 1, -1))
            )
            hidden = layer.final_layer_norm(hidden + layer.fc2(layer.activation_fn(layer.fc1(hidden))))
        logits = self.model.lm_head(hidden) + self.model.final_logits_bias
        return logits[:, -1, :].to(dtype=torch.float32)

    def _processed(self, log_probs: Any, sequences: Any, cur_len: Any) -> Any:
        """``log_probs`` through the logits processors ``generate()`` builds, in its order: no repeated n-gram,
        minimum length, forced first token, forced last token, then each row's own maximum length."""
        import torch

        settings, state = self.settings, self.state
        vocab_size = log_probs.shape[-1]
        minus_inf = -float("inf")
        n = settings.no_repeat_ngram_size
        if n > 0:
            windows = sequences.unfold(dimension=1, size=n, step=1)
            starts = torch.arange(windows.shape[1], device=self.device)
            prefix_positions = (cur_len - n + 1 + torch.arange(n - 1, device=self.device)).clamp(min=0)
            prefix = sequences.index_select(1, prefix_positions)
            matches = (windows[..., :-1] == prefix.unsqueeze(1)).all(dim=-1) & (starts <= cur_len - n)
            banned = log_probs.new_zeros((log_probs.shape[0], vocab_size + 1), dtype=torch.bool)
            banned.scatter_(1, torch.where(matches, windows[..., -1].clamp(max=vocab_size), vocab_size), True)
            log_probs = log_probs.masked_fill(banned[:, :vocab_size], minus_inf)
        if settings.min_length > 0:
            eos_mask = _is_one_of(self.vocabulary, self.eos) & (cur_len < settings.min_length)
            log_probs = torch.where(eos_mask, minus_inf, log_probs)
        if settings.forced_bos_token_id is not None:
            forced = torch.full_like(log_probs, minus_inf)
            forced[:, settings.forced_bos_token_id] = 0
            log_probs = torch.where(cur_len == 1, forced, log_probs)
        if settings.forced_eos_token_ids is not None:
            forced = torch.full_like(log_probs, minus_inf)
            forced.index_fill_(1, self.forced_eos, 0)
            log_probs = torch.where(cur_len == state["max_length"] - 1, forced, log_probs)
        forced = torch.full_like(log_probs, minus_inf)
        forced[:, settings.eos_token_ids[0]] = 0.0
        return torch.where(state["row_max_lengths"] == cur_len + 1, forced, log_probs)

    def _step(self) -> None:
        """One step of transformers' ``_beam_search`` (its names and operations), on the state's buffers."""
        import torch

        settings, state = self.settings, self.state
        batch, beams = self.batch, self.beams
        cur_len, active = state["cur_len"], state["unfinished"]
        running_sequences = state["running_sequences"]
        flat_running = running_sequences.view(batch * beams, -1)
        tokens = flat_running.index_select(1, (cur_len - 1).view(1))
        logits = self._logits(tokens, cur_len - 1)
        log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
        log_probs = self._processed(log_probs, flat_running, cur_len)
        log_probs = log_probs.view(batch, beams, -1) + state["running_beam_scores"][:, :, None]
        log_probs = log_probs.reshape(batch, -1)

        # c. the top-K continuations
        topk_log_probs, topk_indices = torch.topk(log_probs, k=self.beams_to_keep)
        vocab_size = log_probs.shape[-1] // beams
        topk_current_beam_indices = topk_indices // vocab_size
        topk_ids = topk_indices % vocab_size
        topk_running_sequences = _gather_beams(running_sequences, topk_current_beam_indices)
        topk_running_sequences.index_copy_(2, cur_len.view(1), topk_ids.unsqueeze(-1))
        # d. the continuations that hit a stopping criterion: the maximum length or an end-of-sequence token
        hits = (cur_len + 1 >= state["max_length"]) | _is_one_of(topk_ids, self.eos)
        # e. the running beams of the next step
        topk_running_log_probs = topk_log_probs + hits.to(torch.float32) * -1.0e9
        next_topk_indices = torch.topk(topk_running_log_probs, k=beams)[1]
        next_running_sequences = _gather_beams(topk_running_sequences, next_topk_indices)
        next_running_beam_scores = _gather_beams(topk_running_log_probs, next_topk_indices)
        beam_idx = _gather_beams(topk_current_beam_indices + self.batch_offset, next_topk_indices).view(-1)
        # f. the finished beams, if a new one scores higher
        did_top_num_beams_just_finished = hits & self.top_num_beam_mask[None, :]
        topk_log_probs = self._length_penalised(topk_log_probs, cur_len + 1)
        beams_in_batch_are_full = torch.all(state["is_sent_finished"], dim=-1, keepdim=True) & (
            settings.early_stopping is True
        )
        topk_log_probs += beams_in_batch_are_full.to(torch.float32) * -1.0e9
        topk_log_probs += (~state["unsatisfied"]).to(torch.float32) * -1.0e9
        topk_log_probs += (~did_top_num_beams_just_finished) * -1.0e9
        merged_sequences = torch.cat((state["sequences"], topk_running_sequences), dim=1)
        merged_scores = torch.cat((state["beam_scores"], topk_log_probs), dim=1)
        merged_lengths = torch.cat((state["lengths"], (cur_len + 1).expand_as(topk_ids) - 1), dim=1)
        merged_is_sent_finished = torch.cat(
            (state["is_sent_finished"], did_top_num_beams_just_finished), dim=1
        )
        topk_merged_indices = torch.topk(merged_scores, k=beams)[1]
        sequences = _gather_beams(merged_sequences, topk_merged_indices)
        beam_scores = _gather_beams(merged_scores, topk_merged_indices)
        lengths = _gather_beams(merged_lengths, topk_merged_indices)
        is_sent_finished = _gather_beams(merged_is_sent_finished, topk_merged_indices)
        # g. the cache follows the running beams; the early-stopping heuristic and the loop's condition
        for keys, values in zip(self.self_keys, self.self_values, strict=True):
            keys.copy_(keys.index_select(0, beam_idx))
            values.copy_(values.index_select(0, beam_idx))
        next_len = cur_len + 1
        if settings.early_stopping == "never" and settings.length_penalty > 0.0:
            hypothetical = state["max_length"]
        else:
            hypothetical = next_len
        best_possible = self._length_penalised(next_running_beam_scores[:, :1], hypothetical)
        worst_finished = torch.where(is_sent_finished, torch.min(beam_scores, dim=1, keepdim=True)[0], -1.0e9)
        unsatisfied = state["unsatisfied"] & torch.any(best_possible > worst_finished, dim=-1, keepdim=True)
        exists_open_beam = ~(torch.all(is_sent_finished) & (settings.early_stopping is True))
        unfinished = torch.any(unsatisfied) & exists_open_beam & ~torch.all(hits)
        # A step after the search stopped (the host looks only every few steps) leaves the state as it was.
        for name, value in (
            ("running_sequences", next_running_sequences),
            ("running_beam_scores", next_running_beam_scores),
            ("sequences", sequences),
            ("beam_scores", beam_scores),
            ("lengths", lengths),
            ("is_sent_finished", is_sent_finished),
            ("unsatisfied", unsatisfied),
        ):
            state[name].copy_(torch.where(active, value, state[name]))
        state["cur_len"].copy_(torch.where(active, next_len, cur_len))
        state["unfinished"].copy_(active & unfinished)

    def _length_penalised(self, scores: Any, length: Any) -> Any:
        """``scores / (length - 1) ** length_penalty`` (the prompt is the start token), rounded as the device
        rounds transformers' division by a Python number."""
        # index_select, not [length - 1]: indexing by a 0-d tensor reads it on the host (a sync a graph cannot hold)
        if self.device.type == "cuda":
            return scores * self.reciprocals.index_select(0, (length - 1).view(1))
        return scores / self.divisors.index_select(0, (length - 1).view(1))


def _is_one_of(values: Any, ids: Any) -> Any:
    """``torch.isin`` for a handful of ids, by comparison: no sort, nothing a CUDA graph cannot record."""
    return (values.unsqueeze(-1) == ids).any(dim=-1)


def _gather_beams(tensor: Any, beam_indices: Any) -> Any:
    """transformers' ``_gather_beams``: the beams ``beam_indices`` of ``tensor`` (``[batch, beams, ...]``)."""
    import torch

    while len(beam_indices.shape) < len(tensor.shape):
        beam_indices = beam_indices.unsqueeze(-1)
    return torch.take_along_dim(input=tensor, indices=beam_indices, dim=1)
