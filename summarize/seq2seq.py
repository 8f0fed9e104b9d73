"""Abstractive answers with an encoder-decoder model (T5, BART, PEGASUS), decoded as in the paper.

The input is the selected passages' text, ``p1 p2 ... pN`` (optionally with the query in front: "wQ"), truncated
to the model's input limit, behind the checkpoint's own prefix. Decoding starts from the checkpoint's published
summarization settings (its generation config, then its ``task_specific_params["summarization"]``: t5-base's
length penalty 2.0) and applies exactly the paper's overrides: beam search with 4 beams, no repeated trigram,
early stopping, a minimum length chosen by length calibration (``cast calibrate``), and a maximum length equal to
the input's length in tokens. Each answer records the effective settings. Turns are decoded in batches; the
maximum length is enforced per turn, so a turn's answer does not depend on the turns it is batched with.

Decoding goes through :class:`cast.infra.decoding.BeamDecoder`: transformers' plain ``generate()``, or the same search
with a fixed-shape KV cache (``static``) and its step compiled into CUDA graphs (``compiled``), which give the
tokens of ``plain`` faster on a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, Selection
from cast.core.settings import Runtime
from cast.core.stages import Summarizer
from cast.errors import ConfigError
from cast.infra.decoding import BeamDecoder, Decoding
from cast.infra.models import AllowDownload, load_seq2seq, load_tokenizer, resolve_device
from cast.infra.resources import Resources
from cast.infra.text import split_sentences
from cast.summarize import no_answer

# The task prefix T5 was trained with for summarization (used when the model's config names none).
T5_PREFIX = "summarize: "
# Tokenizers without a known limit report a huge ``model_max_length``; anything above this is not a limit.
_NO_LIMIT = 1_000_000
# The generation settings a checkpoint's summarization task may set that the paper does not override.
TASK_GENERATION_KEYS = (
    "length_penalty",
    "repetition_penalty",
    "num_beams",
    "no_repeat_ngram_size",
    "early_stopping",
)
# PEGASUS marks sentence ends with a literal "<n>" (its newline token), which its reference evaluation removes.
_PEGASUS_NEWLINE = re.compile(r"\s*<n>\s*")


def model_input(query: str, selection: Selection, *, with_query: bool, prefix: str) -> str:
    """The generator's input text: ``prefix [query] p1 p2 ... pN`` (empty when the passages have no text)."""
    passages = " ".join(text for text in (p.passage.text.strip() for p in selection.passages) if text)
    if not passages:
        return ""
    return prefix + (f"{query.strip()} {passages}" if with_query and query.strip() else passages)


class Seq2SeqSummarizer(Summarizer):
    """Answers written by a sequence-to-sequence model from the selected passages."""

    name = "seq2seq"

    class Settings(Summarizer.Settings):
        model: Annotated[
            str,
            Field(
                description=(
                    "a Hugging Face model id (in the local cache) or a local folder: ``t5-base``, "
                    "``facebook/bart-large-cnn``, ``google/pegasus-cnn_dailymail``."
                )
            ),
        ] = "facebook/bart-large-cnn"
        min_length: Annotated[
            int, Field(description="the minimum answer length in decoder tokens (set by ``cast calibrate``).")
        ] = 0
        num_beams: Annotated[int, Field(ge=1, description="beams of the beam search.")] = 4
        no_repeat_ngram_size: Annotated[
            int, Field(description="no n-gram of this size appears twice in an answer.")
        ] = 3
        early_stopping: Annotated[
            bool, Field(description="stop a turn's search as soon as ``num_beams`` answers are complete.")
        ] = True
        with_query: Annotated[bool, Field(description='put the query in front of the passages ("wQ").')] = (
            False
        )
        prefix: Annotated[
            str | None,
            Field(
                description=(
                    "text put in front of the input; by default the model's own summarization prefix "
                    "(``summarize: `` for T5), else none."
                )
            ),
        ] = None
        max_input_tokens: Annotated[
            int | None,
            Field(
                ge=1,
                description="the input limit in tokens; by default the model's (512 for T5, 1024 for BART/PEGASUS).",
            ),
        ] = None
        batch_size: Annotated[int, Field(ge=1, description="turns decoded together."), Runtime()] = 8
        device: Annotated[
            str | None,
            Field(description="``auto``, ``cpu``, ``cuda``...; by default the pipeline's ``device``."),
            Runtime(),
        ] = None
        dtype: Annotated[
            str,
            Field(
                description="``auto`` (float32 on CPU, bfloat16 on a GPU), ``float32``, ``float16`` or ``bfloat16``."
            ),
        ] = "auto"
        decoding: Decoding = "plain"
        allow_download: AllowDownload = False

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        device = settings.device
        if device is None:
            device = resources.device if resources is not None else "auto"
        self.device = resolve_device(device)
        self.tokenizer = load_tokenizer(settings.model, allow_download=settings.allow_download)
        self.model = load_seq2seq(
            settings.model, self.device, settings.dtype, allow_download=settings.allow_download
        )
        self.prefix = default_prefix(self.model.config) if settings.prefix is None else settings.prefix
        self.task_settings = task_generation_settings(self.model.config)
        self.max_input_tokens = settings.max_input_tokens or input_limit(
            self.tokenizer, self.model.config, settings.model
        )
        self.decoder = BeamDecoder(
            self.model, settings.decoding, self.max_input_tokens, setting="summarizer.decoding"
        )
        self.eos_token_id = self.decoder.eos_token_id

    @property
    def generator(self) -> str:
        """The name answers record: the stage and its model."""
        return f"{self.name}:{self.setting_values.model}"

    @property
    def min_length(self) -> int:
        """The minimum answer length in decoder tokens (``min_length``; calibrated by ``cast calibrate``)."""
        return self.setting_values.min_length

    def with_min_length(self, min_length: int) -> Seq2SeqSummarizer:
        """The same summarizer (sharing the loaded model) with another minimum length, for calibration: its
        recorded settings say so too."""
        return self.with_settings(min_length=min_length)

    def generation_settings(self) -> dict[str, Any]:
        """The ``generate()`` settings besides the per-turn ``max_length``: the checkpoint's summarization task
        settings, then the paper's (this stage's) overrides."""
        return {
            **self.task_settings,
            "num_beams": self.setting_values.num_beams,
            "no_repeat_ngram_size": self.setting_values.no_repeat_ngram_size,
            "early_stopping": self.setting_values.early_stopping,
            "min_length": self.setting_values.min_length,
        }

    def described_extras(self) -> dict[str, Any]:
        generation_config = self.model.generation_config
        return {
            "model": self.setting_values.model,
            # None in a generation config means generate()'s default, 1.0
            "length_penalty": 1.0
            if generation_config.length_penalty is None
            else generation_config.length_penalty,
            **self.generation_settings(),
            "max_length": "input length",
            "forced_bos_token_id": generation_config.forced_bos_token_id,
            "forced_eos_token_id": generation_config.forced_eos_token_id,
            "prefix": self.prefix,  # the checkpoint's task prefix where the config sets none
            "max_input_tokens": self.max_input_tokens,  # the model's own limit where the config sets none
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "decoding": self.decoder.decoding,
        }

    def summarize(self, query: str, selection: Selection, earlier: Sequence[str] = ()) -> Answer:
        return self.summarize_batch([(query, selection)])[0]

    def summarize_batch(
        self, items: Sequence[tuple[str, Selection]], earlier: Sequence[Sequence[str]] | None = None
    ) -> list[Answer]:  # the conversation's earlier answers are not in the model's input
        from tqdm import tqdm

        texts = [
            model_input(q, s, with_query=self.setting_values.with_query, prefix=self.prefix) for q, s in items
        ]
        answers: list[Answer | None] = [None] * len(items)
        # Longest first, so that each batch pads little.
        todo = sorted((i for i, t in enumerate(texts) if t), key=lambda i: -len(texts[i]))
        batches = [
            todo[k : k + self.setting_values.batch_size]
            for k in range(0, len(todo), self.setting_values.batch_size)
        ]
        for batch in tqdm(batches, desc="answers", unit="batch", disable=len(batches) < 4, leave=False):
            generated = self.generate([texts[i] for i in batch])
            for i, (text, max_length) in zip(batch, generated, strict=True):
                answers[i] = self._answer(text, items[i][1], max_length)
        for i, (_, selection) in enumerate(items):
            if answers[i] is None:
                answers[i] = no_answer(
                    self, tuple(p.id for p in selection.passages), generator=self.generator
                )
        return [answer for answer in answers if answer is not None]  # every one is set by now

    def generate(self, texts: Sequence[str]) -> list[tuple[str, int]]:
        """Decode ``texts`` together; returns each answer and the maximum length it was decoded with."""
        encoded = self.tokenizer(
            list(texts), truncation=True, max_length=self.max_input_tokens, padding=True, return_tensors="pt"
        ).to(self.device)
        max_lengths = encoded["attention_mask"].sum(dim=1)
        output = self.decoder(
            encoded["input_ids"], encoded["attention_mask"], max_lengths, **self.generation_settings()
        )
        decoded = self.tokenizer.batch_decode(output, skip_special_tokens=True)
        if self.model.config.model_type == "pegasus":
            decoded = [_PEGASUS_NEWLINE.sub(" ", text) for text in decoded]
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


def summarization_task(config: Any) -> dict[str, Any]:
    """The checkpoint config's ``task_specific_params["summarization"]`` (empty when it has none)."""
    return (getattr(config, "task_specific_params", None) or {}).get("summarization") or {}


def default_prefix(config: Any) -> str:
    """The model's summarization prefix, as transformers' summarization pipeline takes it: the task parameters'
    ``prefix``, else the config's own (BART-large-cnn: ``" "``), else ``summarize: `` for T5."""
    task = summarization_task(config)
    if "prefix" in task:
        return task["prefix"]
    if getattr(config, "prefix", None) is not None:
        return config.prefix
    return T5_PREFIX if config.model_type in ("t5", "mt5") else ""


def task_generation_settings(config: Any) -> dict[str, Any]:
    """The generation settings the checkpoint publishes for summarization (lengths and prefix left out: the
    paper sets the lengths, the prefix goes in front of the input)."""
    task = summarization_task(config)
    return {key: task[key] for key in TASK_GENERATION_KEYS if key in task}


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
