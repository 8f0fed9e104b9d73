"""Turns taken as far as re-ranking (or entity linking) once, to run the later stages under many settings.

PyTerrier's ``precompute_prefix`` for our pipeline: :func:`cast.conversation.walker.prepare_conversations` runs the
early stages (PTKB, rewrite, first stage, re-rank, and with ``stop_after="link"`` the linker) over every turn and
returns a :class:`Prepared`; :func:`~cast.conversation.walker.answer_conversations` with ``prepared=`` runs only
selection and answering from it. A prepared pass records how its early stages were set (their ``describe()``), and a pipeline whose early
stages differ refuses it, naming the stage: a study never mixes two retrievals unawares. Saved with
:meth:`Prepared.save` (gzipped JSON lines), it survives the process (``cast run --prepared``, bench/answers.py).

Example:
    >>> prepared = prepare_conversations(pipeline, conversations, stop_after="link")  # doctest: +SKIP
    >>> for gamma in (0.0, 0.25, 0.5):  # doctest: +SKIP
    ...     selector = build_stage("selector", {"name": "eg", "gamma": gamma}, resources)
    ...     results = answer_conversations(pipeline.with_stages(config, selector=selector), conversations,
    ...                                    prepared=prepared)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from cast.core.limits import bounded_turn
from cast.core.pipeline import STOP_POINTS
from cast.core.records import PreparedTurn, ScoredPassage, Turn, from_dict, to_dict
from cast.core.registry import without_runtime_settings
from cast.errors import CastError, ConfigError, DataFormatError, excerpt
from cast.formats.textfiles import RECORD_LINE_BYTES, json_lines
from cast.infra.atomic import atomic_path

FORMAT = 1


class EarlyStages(Protocol):
    """What says how a pipeline's early stages are set: a :class:`~cast.core.pipeline.Pipeline`, or a runner."""

    def early_description(self, stop_after: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Prepared:
    """Every turn of some conversations taken as far as ``stop_after``.

    Attributes:
        stop_after: ``rerank`` or ``link`` (:data:`STOP_POINTS`).
        description: :meth:`~cast.core.pipeline.Pipeline.early_description` of the pipeline that prepared them.
        turns: the prepared turns by qid.
    """

    stop_after: str
    description: dict[str, Any]
    turns: dict[str, PreparedTurn]

    def check(self, pipeline: EarlyStages) -> None:
        """A :class:`ConfigError` if ``pipeline``'s early stages are not those that prepared the turns."""
        found = self.difference(pipeline.early_description(self.stop_after))
        if found is not None:
            raise ConfigError(
                f"the prepared turns were made with another {found}: prepare them again with this config, or "
                "finish them with the config that prepared them"
            )

    def difference(self, description: dict[str, Any]) -> str | None:
        """How the early stages described by ``description`` (``Pipeline.early_description``) differ from those
        that prepared the turns (their :class:`~cast.core.settings.Runtime` settings aside), or None."""
        recorded = without_runtime_settings(json.loads(json.dumps(self.description)))
        own = without_runtime_settings(json.loads(json.dumps(description)))
        for key in dict.fromkeys([*recorded, *own]):
            if recorded.get(key) != own.get(key):
                return f"{key} ({_describe(recorded.get(key))}, this pipeline: {_describe(own.get(key))})"
        return None

    def missing(self, qids: Iterable[str]) -> list[str]:
        """Those of ``qids`` that were not prepared."""
        return [qid for qid in qids if qid not in self.turns]

    def check_turns(self, turns: Iterable[Turn]) -> None:
        """A :class:`ConfigError` if a prepared turn is not ``turns``' turn of its qid (other topics that reuse
        the qids: their answers would be to the prepared questions), naming the first field that differs."""
        for turn in turns:
            prepared = self.turns.get(turn.qid)
            if prepared is None:
                continue
            mine, theirs = to_dict(bounded_turn(turn)), to_dict(prepared.turn)
            differs = next((key for key in mine if mine[key] != theirs.get(key)), None)
            if differs is not None:
                raise ConfigError(
                    f"turn {turn.qid} was prepared from other topics (its {differs}: {excerpt(theirs.get(differs))}, "
                    f"these topics: {excerpt(mine[differs])}): prepare these topics, or finish with those"
                )

    def compact(self, keep: int) -> Prepared:
        """The same turns with the passage texts below each ranking's first ``keep`` dropped: later stages read
        only the head (the candidates); below it a run file needs ids and scores."""
        return replace(
            self,
            turns={
                qid: replace(t, ranking=compact_ranking(t.ranking, keep)) for qid, t in self.turns.items()
            },
        )

    def subset(self, qids: Iterable[str]) -> Prepared:
        """The prepared turns of ``qids`` only (e.g. one Ray worker's share)."""
        return replace(self, turns={qid: self.turns[qid] for qid in qids if qid in self.turns})

    def save(self, path: str | Path) -> Path:
        """Write to ``path`` (gzipped JSON lines: a header, then one turn per line), atomically.

        Raises:
            CastError: it cannot be written (a full disk, a folder there), naming ``path``; nothing is left.
        """
        path = Path(path)
        header = {"format": FORMAT, "stop_after": self.stop_after, "description": self.description}
        try:
            # No file name in the gzip header: the temporary one would be.
            with atomic_path(path) as tmp, tmp.open("wb") as raw, gzip.GzipFile("", "wb", fileobj=raw) as f:
                f.write((json.dumps(header, ensure_ascii=False) + "\n").encode("utf-8"))
                for turn in self.turns.values():
                    f.write((json.dumps(to_dict(turn), ensure_ascii=False) + "\n").encode("utf-8"))
        except OSError as e:
            raise CastError(f"cannot write the prepared turns to {path}: {e.strerror or e}") from e
        return path

    @classmethod
    def load(cls, path: str | Path) -> Prepared:
        """Read a file written by :meth:`save`.

        Raises:
            CastError: no such file. DataFormatError: not a prepared-turns file, or of another format.
        """
        path = Path(path)
        if not path.exists():
            raise CastError(
                f"no prepared turns at {path}: make them with `cast run --stop-after rerank --prepared {path}` first"
            )
        lines = json_lines(path, RECORD_LINE_BYTES, gzipped=True)
        number, header = next(lines, (1, {}))
        if (
            header.get("format") != FORMAT
            or header.get("stop_after") not in STOP_POINTS
            or not isinstance(header.get("description"), dict)
        ):
            raise DataFormatError(
                path, f"not a prepared-turns file of format {FORMAT} (header: {excerpt(header)})", 1
            )
        turns = {}
        for number, record in lines:
            try:
                turn = from_dict(PreparedTurn, record)
            except TypeError as e:
                raise DataFormatError(path, f"not a prepared turn ({e})", number) from None
            turns[turn.qid] = turn
        return cls(header["stop_after"], header["description"], turns)


def compact_ranking(ranking: Sequence[ScoredPassage], keep: int) -> tuple[ScoredPassage, ...]:
    """``ranking`` with the passage texts below its first ``keep`` dropped (ids, titles and scores kept)."""
    return tuple(
        p if number < keep or not p.passage.text else replace(p, passage=replace(p.passage, text=""))
        for number, p in enumerate(ranking)
    )


def _describe(value: Any) -> str:
    return "none" if value is None else json.dumps(value, sort_keys=True)
