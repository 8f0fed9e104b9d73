"""Conversational query rewriting with a T5 sequence-to-sequence model (e.g. ``castorini/t5-base-canard``).

Two input formats:

* ``castorini`` (the default): the previous utterances then the current one, joined by ``" ||| "`` and
  re-tokenised with spaCy's English tokenizer (``"What is throat cancer ?"``), the rewrite decoded with
  tokenisation clean-up: byte for byte what castorini's chatty-goose (``Ntr``) feeds ``castorini/t5-base-canard``,
  the format that checkpoint was trained on (CANARD).
* ``paper``: ``q_i [CTX] q_1 p_1 [TURN] q_2 p_2 [TURN] ... q_{i-1} p_{i-1}``, where ``p_j`` is the canonical
  response of turn j where the topics give one, else the top passage retrieved at turn j. For a checkpoint
  fine-tuned on that format; ``castorini/t5-base-canard`` never saw it (a warning says so at start-up).

History longer than the input limit is cut at token level from its oldest end; the current utterance is always
kept whole (unless it alone exceeds the limit). chatty-goose cuts nothing: the inputs are the same while they fit
(CAsT conversations fit in 512 tokens).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.records import PastTurn, Rewrite, Turn
from cast.core.settings import Runtime
from cast.core.stages import Rewriter
from cast.errors import ConfigError
from cast.infra.decoding import BeamDecoder, Decoding
from cast.infra.models import AllowDownload, load_seq2seq, load_tokenizer, resolve_device, special_token_wrap
from cast.infra.resources import Resources
from cast.rewrite.baselines import require_text

INPUT_FORMATS = ("castorini", "paper")
HISTORY_QUERIES = ("utterance", "rewrite")
CASTORINI_SEPARATOR = " ||| "
CONTEXT_MARK = "[CTX]"
TURN_MARK = "[TURN]"
# Checkpoints (Hub ids or folder names) trained on the castorini format, not on the paper's.
CASTORINI_FORMAT_CHECKPOINTS = frozenset({"t5-base-canard"})

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelInput:
    """A model input in three parts; only ``history`` may be shortened, from its start (the oldest turns)."""

    before: str
    history: str
    after: str


def history_context(past: PastTurn, history_query: str = "utterance") -> str:
    """The text of an earlier turn in the paper's format: its query and ``p_j`` (response, else top passage)."""
    query = past.turn.utterance if history_query == "utterance" else past.query
    passage = past.turn.response or (past.top_passage.text if past.top_passage is not None else None)
    return query if not passage else f"{query} {passage}"


def build_input(
    history: Sequence[PastTurn], utterance: str, input_format: str, history_query: str = "utterance"
) -> ModelInput:
    """The model input for ``utterance`` after ``history`` (oldest first), in the chosen format.

    Example:
        castorini: ``ModelInput("", "q1 ||| q2 ||| ", "q3")``;
        paper: ``ModelInput("q3 [CTX] ", "q1 p1 [TURN] q2 p2", "")``.
    """
    if input_format == "castorini":
        queries = [p.turn.utterance if history_query == "utterance" else p.query for p in history]
        return castorini_input(queries, utterance)
    if input_format == "paper":
        contexts = [history_context(p, history_query) for p in history]
        return ModelInput(f"{utterance} {CONTEXT_MARK} ", f" {TURN_MARK} ".join(contexts), "")
    raise ConfigError(f"unknown T5 input_format {input_format!r}; use one of {', '.join(INPUT_FORMATS)}")


@functools.cache
def _spacy_english() -> Any:
    """spaCy's rule-based English tokenizer (no trained pipeline), as chatty-goose uses."""
    from spacy.lang.en import English

    return English()


def castorini_input(queries: Sequence[str], utterance: str) -> ModelInput:
    """chatty-goose's input: ``" ||| ".join(queries + [utterance])``, then every spaCy token joined by one space.

    The history part ends where the current utterance's tokens begin, so that ``before + history + after`` is
    exactly chatty-goose's string.
    """
    history_text = "".join(q + CASTORINI_SEPARATOR for q in queries)
    doc = _spacy_english()(history_text + utterance)
    history_tokens = [t.text for t in doc if t.idx < len(history_text)]
    utterance_tokens = [t.text for t in doc if t.idx >= len(history_text)]
    return ModelInput("", "".join(t + " " for t in history_tokens), " ".join(utterance_tokens))


def keep_newest(history_ids: list[int], budget: int) -> list[int]:
    """The last ``budget`` token ids of the history (the oldest are cut first)."""
    return history_ids[max(len(history_ids) - budget, 0) :] if budget > 0 else []


class T5Rewriter(Rewriter):
    """Rewrites each utterance with a T5 model given the conversation so far.

    The model is loaded when the stage is built, so a missing model stops the run before the first turn."""

    name = "t5"
    reads_top_passages = True  # p_j: the response, else the top passage

    class Settings(Rewriter.Settings):
        model: Annotated[
            str, Field(description="a Hugging Face model id (must be in the local cache) or a local folder.")
        ] = "castorini/t5-base-canard"
        tokenizer: Annotated[
            str | None, Field(description="the tokenizer's id or folder, if not the model's own.")
        ] = None
        input_format: Annotated[
            Literal["castorini", "paper"],
            Field(description="``castorini`` or ``paper`` (see the module docstring)."),
        ] = "castorini"
        history_query: Annotated[
            Literal["utterance", "rewrite"],
            Field(
                description="which text stands for an earlier turn's query: its raw ``utterance`` or its ``rewrite``."
            ),
        ] = "utterance"
        num_beams: Annotated[int, Field(description="beam width of the search.")] = 10
        max_input_length: Annotated[
            int, Field(description="model input limit in tokens (history is cut from the oldest end to fit).")
        ] = 512
        max_output_length: Annotated[int, Field(description="the longest rewrite, in tokens.")] = 64
        batch_size: Annotated[
            int, Field(description="turns rewritten per forward pass in :meth:`rewrite_batch`."), Runtime()
        ] = 16
        dtype: Annotated[
            str,
            Field(
                description="``auto`` (float32 on CPU, bfloat16 on GPU), ``float32``, ``float16`` or ``bfloat16``."
            ),
        ] = "auto"
        decoding: Decoding = "plain"
        allow_download: AllowDownload = False

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        if (
            settings.input_format == "paper"
            and settings.model.rstrip("/").rsplit("/", 1)[-1] in CASTORINI_FORMAT_CHECKPOINTS
        ):
            log.warning(
                "rewriter: %s was trained on the castorini input format, not the paper's [CTX]/[TURN] one: "
                "set rewriter.input_format: castorini, or point rewriter.model at a checkpoint fine-tuned on it",
                settings.model,
            )
        self.device = resolve_device(resources.device)
        self.tokenizer = load_tokenizer(
            settings.tokenizer or settings.model, allow_download=settings.allow_download
        )
        self.model = load_seq2seq(
            settings.model, self.device, settings.dtype, allow_download=settings.allow_download
        )
        self._special_wrap = special_token_wrap(self.tokenizer)
        self.decoder = BeamDecoder(
            self.model,
            settings.decoding,
            settings.max_input_length,
            settings.max_output_length,
            setting="rewriter.decoding",
        )

    def described_extras(self) -> dict[str, Any]:
        return {
            "model": self.setting_values.model,
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "decoding": self.decoder.decoding,
        }

    def encode(self, model_input: ModelInput) -> tuple[list[int], int]:
        """Token ids of the input, with the history cut to fit ``max_input_length``; and how many were cut."""
        before, history, after = (
            self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
            for text in (model_input.before, model_input.history, model_input.after)
        )
        prefix, suffix = self._special_wrap
        limit = self.setting_values.max_input_length - len(prefix) - len(suffix)
        kept = keep_newest(history, limit - len(before) - len(after))
        return prefix + (before + kept + after)[:limit] + suffix, len(history) - len(kept)

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        return self.rewrite_batch([(history, turn)])[0]

    def rewrite_batch(self, items: Sequence[tuple[Sequence[PastTurn], Turn]]) -> list[Rewrite]:
        encoded = []
        for history, turn in items:
            utterance = require_text(turn.utterance, turn, "utterance")
            encoded.append(
                self.encode(
                    build_input(
                        history,
                        utterance,
                        self.setting_values.input_format,
                        self.setting_values.history_query,
                    )
                )
            )
        outputs: list[str] = []
        for start in range(0, len(encoded), self.setting_values.batch_size):
            outputs.extend(
                self._generate([ids for ids, _ in encoded[start : start + self.setting_values.batch_size]])
            )
        rewrites = []
        for (history, turn), (ids, cut), output in zip(items, encoded, outputs, strict=True):
            inputs = {
                # as fed to the model: no clean-up, which would glue "cancer ?" back together
                "model_input": self.tokenizer.decode(
                    ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
                ),
                "history_turns": len(history),
                "history_tokens_cut": cut,
            }
            if not output:  # recorded, so a reader of the run sees which rewrites the model left empty
                inputs["empty_generation"] = True
            rewrites.append(Rewrite(query=output or turn.utterance.strip(), method=self.name, inputs=inputs))
        return rewrites

    def _generate(self, batch_ids: list[list[int]]) -> list[str]:
        padded = self.tokenizer.pad({"input_ids": batch_ids}, return_tensors="pt").to(self.model.device)
        generated = self.decoder(
            padded["input_ids"],
            padded["attention_mask"],
            self.setting_values.max_output_length,
            self.setting_values.num_beams,
            early_stopping=self.setting_values.num_beams > 1,
        )
        texts = self.tokenizer.batch_decode(
            generated,
            skip_special_tokens=True,
            clean_up_tokenization_spaces=self.setting_values.input_format == "castorini",
        )
        return [text.strip() for text in texts]
