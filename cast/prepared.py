"""Turns taken as far as re-ranking (or entity linking) once, to run the later stages under many settings.

PyTerrier's ``precompute_prefix`` for our pipeline: :meth:`cast.pipeline.Pipeline.prepare` runs the early stages
(PTKB, rewrite, first stage, re-rank, and with ``stop_after="link"`` the linker) over every turn and returns a
:class:`Prepared`; :meth:`~cast.pipeline.Pipeline.run` with ``prepared=`` runs only selection and answering from
it. A prepared pass records how its early stages were set (their ``describe()``), and a pipeline whose early
stages differ refuses it, naming the stage: a study never mixes two retrievals unawares. Saved with
:meth:`Prepared.save` (gzipped JSON lines), it survives the process (``cast run --prepared``, bench/answers.py).

Example:
    >>> prepared = pipeline.prepare(conversations, stop_after="link")  # doctest: +SKIP
    >>> for gamma in (0.0, 0.25, 0.5):  # doctest: +SKIP
    ...     selector = build_stage("selector", {"name": "eg", "gamma": gamma}, resources)
    ...     results = pipeline.with_stages(config, selector=selector).run(conversations, prepared=prepared)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.atomic import atomic_path
from cast.errors import CastError, ConfigError, DataFormatError, excerpt
from cast.records import (
    EntityMention,
    PTKBSelection,
    Rewrite,
    ScoredPassage,
    Turn,
    from_dict,
    to_dict,
)
from cast.textfiles import RECORD_LINE_BYTES, input_lines, json_object

if TYPE_CHECKING:
    from cast.pipeline import Pipeline, PreparedTurn

FORMAT = 1
# Where a prepared pass may stop, and the stages it has run by then, in pipeline order. Not before re-ranking: a
# later turn's rewrite reads an earlier turn's re-ranked top passage.
EARLY_STAGES = {
    "rerank": ("ptkb", "rewriter", "first_stage", "reranker"),
    "link": ("ptkb", "rewriter", "first_stage", "reranker", "linker"),
}
STOP_POINTS = tuple(EARLY_STAGES)


def early_description(pipeline: Pipeline, stop_after: str) -> dict[str, Any]:
    """What decides a prepared pass's turns: the early stages' ``describe()``, the response rule, and (when it
    linked) how many candidates it linked."""
    described = pipeline.describe()
    early = {kind: described[kind] for kind in EARLY_STAGES[stop_after] if kind in described}
    early["history_responses"] = described["history_responses"]
    early["index"] = described.get("index")
    if stop_after == "link":
        early["candidates"] = pipeline.candidates
    return early


@dataclass(frozen=True)
class Prepared:
    """Every turn of some conversations taken as far as ``stop_after``.

    Attributes:
        stop_after: ``rerank`` or ``link`` (:data:`STOP_POINTS`).
        description: :func:`early_description` of the pipeline that prepared them.
        turns: the prepared turns by qid.
    """

    stop_after: str
    description: dict[str, Any]
    turns: dict[str, PreparedTurn]

    def check(self, pipeline: Pipeline) -> None:
        """A :class:`ConfigError` if ``pipeline``'s early stages are not those that prepared the turns."""
        found = self.difference(early_description(pipeline, self.stop_after))
        if found is not None:
            raise ConfigError(
                f"the prepared turns were made with another {found}: prepare them again with this config, or "
                "finish them with the config that prepared them"
            )

    def difference(self, description: dict[str, Any]) -> str | None:
        """How the early stages described by ``description`` (:func:`early_description`) differ from those that
        prepared the turns (their :class:`~cast.settings.Runtime` settings aside), or None."""
        from cast.registry import without_runtime_settings

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
        from cast.limits import bounded_turn

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
                    f.write((json.dumps(_turn_record(turn), ensure_ascii=False) + "\n").encode("utf-8"))
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
        lines = (
            (number, json_object(line, path, number))
            for number, line in input_lines(path, RECORD_LINE_BYTES, gzipped=True)
            if line.strip()
        )
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
                turn = _turn_from_record(record)
            except (KeyError, TypeError, AttributeError) as e:
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


def _turn_record(turn: PreparedTurn) -> dict[str, Any]:
    return {
        "turn": to_dict(turn.turn),
        "rewrite": to_dict(turn.rewrite),
        "ranking": [to_dict(p) for p in turn.ranking],
        "links": None if turn.links is None else to_dict(turn.links),
        "timings": turn.timings,
        "input_limits": turn.input_limits,
        "ptkb": None if turn.ptkb is None else to_dict(turn.ptkb),
    }


def _turn_from_record(record: dict[str, Any]) -> PreparedTurn:
    from cast.pipeline import PreparedTurn, TurnLinks

    links = record["links"]
    if not all(isinstance(record[key], dict) for key in ("timings", "input_limits")):
        raise TypeError("'timings' and 'input_limits' must be objects")
    return PreparedTurn(
        turn=from_dict(Turn, record["turn"]),
        rewrite=from_dict(Rewrite, record["rewrite"]),
        ranking=tuple(from_dict(ScoredPassage, p) for p in record["ranking"]),
        links=None
        if links is None
        else TurnLinks(
            query_entities=tuple(from_dict(EntityMention, m) for m in links["query_entities"]),
            passage_entities={
                pid: tuple(from_dict(EntityMention, m) for m in ms)
                for pid, ms in links["passage_entities"].items()
            },
            unlinked_texts=tuple(links["unlinked_texts"]),
        ),
        timings=record["timings"],
        input_limits=record["input_limits"],
        ptkb=None if record["ptkb"] is None else from_dict(PTKBSelection, record["ptkb"]),
    )
