"""Resumable run outputs: ``NAME.run`` (TREC format) and ``NAME.answers.jsonl`` (one record per turn).

While a run is in progress, each finished turn is appended to ``NAME.run.partial`` and
``NAME.answers.jsonl.partial`` (run lines first, then the answers record, each flushed to disk). An interrupted run
resumes from the turns whose answers record is complete. When every turn is done, both files are rewritten in
topic order and renamed into place, so a file without ``.partial`` is always complete.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.atomic import write_lines_atomic
from cast.errors import CastError
from cast.records import ScoredPassage
from cast.runfile import format_query, read_run, write_run


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
        prefix = Path(prefix)
        self.run_path = prefix.parent / f"{prefix.name}.run"
        self.answers_path = prefix.parent / f"{prefix.name}.answers.jsonl"
        self.tag = tag
        existing = [p for p in (self.run_path, self.answers_path) if p.exists()]
        if existing and not overwrite:
            raise CastError(f"{existing[0]} already exists; choose another --output or pass --overwrite")
        prefix.parent.mkdir(parents=True, exist_ok=True)

    @property
    def _run_partial(self) -> Path:
        return self.run_path.with_name(self.run_path.name + ".partial")

    @property
    def _answers_partial(self) -> Path:
        return self.answers_path.with_name(self.answers_path.name + ".partial")

    def completed(self) -> dict[str, dict[str, Any]]:
        """Answers records of turns finished by an earlier, interrupted run (and trims its run file to them)."""
        if not self._answers_partial.exists():
            self._run_partial.unlink(missing_ok=True)
            return {}
        done: dict[str, dict[str, Any]] = {}
        good_bytes = 0
        with self._answers_partial.open("rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break  # a record cut short by the interruption: that turn is redone
                if not line.endswith(b"\n"):
                    break
                done[record["qid"]] = record
                good_bytes += len(line)
        with self._answers_partial.open("r+b") as f:
            f.truncate(good_bytes)
        rankings = read_run(self._run_partial) if self._run_partial.exists() else {}
        write_run(
            self._run_partial, {qid: list(r.items()) for qid, r in rankings.items() if qid in done}, self.tag
        )
        return done

    def append(self, qid: str, ranking: Sequence[ScoredPassage], record: dict[str, Any]) -> None:
        """Add one finished turn (its run lines, then its answers record)."""
        scored = zip((p.id for p in ranking), run_scores(ranking), strict=True)
        _append_durably(self._run_partial, format_query(qid, scored, self.tag))
        _append_durably(self._answers_partial, json.dumps(record, ensure_ascii=False) + "\n")

    def finalize(self, qid_order: Sequence[str]) -> None:
        """Write both files in ``qid_order`` and move them into place."""
        order = {qid: i for i, qid in enumerate(qid_order)}
        records = [
            json.loads(line) for line in self._answers_partial.read_text(encoding="utf-8").splitlines()
        ]
        missing = set(order) - {r["qid"] for r in records}
        if missing:
            raise CastError(
                f"cannot finish the run: {len(missing)} turn(s) have no answer, e.g. {sorted(missing)[0]}"
            )
        records.sort(key=lambda r: order[r["qid"]])
        rankings = read_run(self._run_partial) if self._run_partial.exists() else {}
        write_run(
            self.run_path, {qid: list(rankings[qid].items()) for qid in order if qid in rankings}, self.tag
        )
        write_lines_atomic(self.answers_path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        self._run_partial.unlink(missing_ok=True)
        self._answers_partial.unlink(missing_ok=True)


def _append_durably(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
