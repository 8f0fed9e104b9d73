"""Baseline query formulations: the raw utterance, the manual rewrite (oracle), the topic file's automatic one.

Learned rewriters live in :mod:`cast.rewrite.t5` and :mod:`cast.rewrite.hqe`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field

from cast.core.records import Conversation, PastTurn, Rewrite, Turn
from cast.core.registry import build_stage
from cast.core.stages import Rewriter
from cast.errors import ConfigError, EmptyUtteranceError
from cast.infra.resources import Resources


def require_text(text: str | None, turn: Turn, what: str) -> str:
    """``text`` stripped, or an error naming the turn when it is empty."""
    if text is None or not text.strip():
        raise EmptyUtteranceError(f"turn {turn.qid}: the {what} is empty")
    return text.strip()


class RawRewriter(Rewriter):
    """The utterance as the user typed it."""

    name = "raw"

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        return Rewrite(query=require_text(turn.utterance, turn, "utterance"), method=self.name)


class _TopicRewriter(Rewriter):
    """A rewrite taken from the topic file."""

    field_name = ""

    class Settings(Rewriter.Settings):
        fallback: Annotated[
            str | None,
            Field(
                description="a rewriter name (one that needs no topic rewrite, e.g. ``raw``, ``hqe``) for turns "
                "without one."
            ),
        ] = None

        @classmethod
        def check_together(cls, values: Mapping[str, Any]) -> None:
            if values.get("fallback") in ("manual", "automatic"):
                raise ConfigError(
                    f"rewriter fallback must be a rewriter that needs no topic rewrite, not {values['fallback']!r}"
                )

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        self._fallback: Rewriter | None = None
        fallback = self.setting_values.fallback
        if fallback is not None:
            stage = build_stage("rewriter", {"name": fallback}, resources or Resources({}))
            assert isinstance(stage, Rewriter)
            self._fallback = stage

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        text = getattr(turn, self.field_name)
        if (text is None or not text.strip()) and self._fallback is not None:
            return self._fallback.rewrite(history, turn)
        if text is None:
            raise self._missing(turn)
        return Rewrite(query=require_text(text, turn, self._label), method=self.name)

    def check_topics(self, conversations: Sequence[Conversation]) -> None:
        if self._fallback is None:
            for turn in (t for c in conversations for t in c.turns):
                if getattr(turn, self.field_name) is None:
                    raise self._missing(turn)

    @property
    def _label(self) -> str:
        return self.field_name.replace("_", " ")

    def _missing(self, turn: Turn) -> ConfigError:
        return ConfigError(
            f"turn {turn.qid} has no {self._label}; use topics that carry one, or set rewriter.fallback (e.g. hqe)"
        )


class ManualRewriter(_TopicRewriter):
    """The organisers' manual rewrite (an oracle upper bound)."""

    name = "manual"

    field_name = "manual_rewrite"


class AutomaticRewriter(_TopicRewriter):
    """The automatic rewrite distributed with the topics (e.g. CAsT 2020-2022 organiser baselines)."""

    name = "automatic"

    field_name = "automatic_rewrite"
