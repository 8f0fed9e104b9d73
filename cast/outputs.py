"""Resumable run outputs: ``NAME.run`` (TREC format) and ``NAME.answers.jsonl`` (one record per turn).

While a run is in progress, each finished turn is appended to ``NAME.run.partial`` and
``NAME.answers.jsonl.partial`` (run lines first, then the answers record, each flushed to disk). An interrupted run
resumes from the turns whose answers record is complete, provided it answers the same turns with the same settings
(:func:`resume_conflict`): otherwise the files would mix two experiments. When every turn is done, both files are
rewritten in topic order and renamed into place, so a file without ``.partial`` is always complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cast.atomic import write_lines_atomic
from cast.errors import CastError
from cast.records import ScoredPassage
from cast.runfile import check_tag, format_query, read_run, write_run


def run_scores(ranking: Sequence[ScoredPassage]) -> list[float]:
    """Scores to write for a ranking, non-increasing so that ``trec_eval`` (which sorts by score) keeps our order.

    A first-stage ranking keeps its Lucene scores. A re-ranked head followed by first-stage passages mixes two
    scales (probabilities above log-likelihoods), so then the score written is ``n - rank + 1``.
    """
    scores = [p.score for p in ranking]
    if all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
        return scores
    return [float(len(ranking) - i) for i in range(len(ranking))]


class RunOutputs:
    """The two output files of ``cast run --output PREFIX``.

    Args:
        prefix: e.g. ``runs/lmd-eg`` gives ``runs/lmd-eg.run`` and ``runs/lmd-eg.answers.jsonl``.
        tag: the run tag written in the run file's last column.
        overwrite: replace complete outputs that already exist (otherwise that is an error).
    """

    def __init__(self, prefix: str | Path, tag: str, *, overwrite: bool = False):
        given = str(prefix)
        prefix = Path(prefix)
        if not given or given.endswith(("/", os.sep)) or prefix.is_dir():
            example = prefix / "eg" if given else Path("runs", "eg")
            problem = f"--output {given!r} is a folder" if given else "--output is empty"
            raise CastError(
                f"{problem}, but it is the prefix of the output files: give e.g. {example} (writes "
                f"{example}.run and {example}.answers.jsonl)"
            )
        try:  # now, not when the finished run is written
            check_tag(tag)
        except ValueError as e:
            raise CastError(f"{e}: choose another (--tag, or `tag` in the config)") from None
        self.run_path = prefix.parent / f"{prefix.name}.run"
        self.answers_path = prefix.parent / f"{prefix.name}.answers.jsonl"
        self.tag = tag
        existing = [p for p in (self.run_path, self.answers_path) if p.exists()]
        if existing and not overwrite:
            raise CastError(f"{existing[0]} already exists; choose another --output or pass --overwrite")
        try:  # now, rather than after the models have loaded and the first turn is answered
            prefix.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=prefix.parent):
                pass
        except OSError as e:
            if isinstance(e, FileExistsError):  # mkdir met a file where a folder of the prefix should be
                reason = f"{e.filename} is a file, not a folder"
            else:
                reason = f"{e.strerror} ({e.filename or prefix.parent})"
            raise CastError(
                f"cannot write the outputs in {prefix.parent}: {reason}; choose another --output"
            ) from e

    @property
    def run_partial(self) -> Path:
        return self.run_path.with_name(self.run_path.name + ".partial")

    @property
    def answers_partial(self) -> Path:
        return self.answers_path.with_name(self.answers_path.name + ".partial")

    def completed(self) -> dict[str, dict[str, Any]]:
        """Answers records of turns finished by an earlier, interrupted run (and trims its run file to them).

        A turn counts as finished when its answers record is whole; its run lines were written before it. Lines
        of unfinished turns, including one cut short by the interruption, are dropped from both files.
        """
        if not self.answers_partial.exists():
            self.run_partial.unlink(missing_ok=True)
            return {}
        done: dict[str, dict[str, Any]] = {}
        good_bytes = 0
        with self.answers_partial.open("rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break  # a record cut short by the interruption: that turn is redone
                if not line.endswith(b"\n"):
                    break
                done[record["qid"]] = record
                good_bytes += len(line)
        with self.answers_partial.open("r+b") as f:
            f.truncate(good_bytes)
        kept: list[str] = []
        if self.run_partial.exists():
            with self.run_partial.open("rb") as f:
                kept = [
                    line.decode("utf-8")
                    for line in f
                    if line.endswith(b"\n") and line.split(b" ", 1)[0].decode("utf-8", "replace") in done
                ]
        write_lines_atomic(self.run_partial, kept)
        return done

    def discard_partial(self) -> None:
        """Forget the turns of an interrupted run (to start over)."""
        self.run_partial.unlink(missing_ok=True)
        self.answers_partial.unlink(missing_ok=True)

    def append(self, qid: str, ranking: Sequence[ScoredPassage], record: dict[str, Any]) -> None:
        """Add one finished turn (its run lines, then its answers record)."""
        scored = zip((p.id for p in ranking), run_scores(ranking), strict=True)
        _append_durably(self.run_partial, format_query(qid, scored, self.tag))
        _append_durably(self.answers_partial, json.dumps(record, ensure_ascii=False) + "\n")

    def finalize(self, qid_order: Sequence[str]) -> None:
        """Write both files in ``qid_order`` and move them into place."""
        order = {qid: i for i, qid in enumerate(qid_order)}
        records = [json.loads(line) for line in self.answers_partial.read_text(encoding="utf-8").splitlines()]
        missing = set(order) - {r["qid"] for r in records}
        if missing:
            raise CastError(
                f"cannot finish the run: {len(missing)} turn(s) have no answer, e.g. {sorted(missing)[0]}"
            )
        records.sort(key=lambda r: order[r["qid"]])
        rankings = read_run(self.run_partial) if self.run_partial.exists() else {}
        write_run(
            self.run_path, {qid: list(rankings[qid].items()) for qid in order if qid in rankings}, self.tag
        )
        write_lines_atomic(self.answers_path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        self.discard_partial()


def resume_conflict(
    done: Mapping[str, Mapping[str, Any]], utterances: Mapping[str, str], config: Mapping[str, Any]
) -> str | None:
    """Why the turns an interrupted run answered cannot be reused by this run, or None when they can.

    Args:
        done: the answers records of the interrupted run, by qid (:meth:`RunOutputs.completed`).
        utterances: the utterance of each turn this run answers, by qid.
        config: this run's stage settings, as its records store them (``Pipeline.describe()``).
    """
    current = json.loads(json.dumps(config))  # as read back from a record: tuples become lists
    for qid, record in done.items():
        if qid not in utterances:
            return f"it answered turn {qid}, which is not in these topics"
        if record.get("utterance") != utterances[qid]:
            return f"turn {qid} had another utterance"
        difference = _difference(record.get("config"), current)
        if difference is not None:
            return f"it answered turn {qid} with other settings ({difference})"
    return None


def _difference(old: Any, new: Any, key: str = "") -> str | None:
    """The first setting that differs between two stage descriptions, as ``key: old -> new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        for name in dict.fromkeys([*old, *new]):
            found = _difference(old.get(name), new.get(name), f"{key}.{name}" if key else name)
            if found is not None:
                return found
        return None
    return None if old == new else f"{key or 'config'}: {old!r} -> {new!r}"


def _append_durably(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
