"""Resumable run outputs: ``NAME.run`` (TREC format) and ``NAME.answers.jsonl`` (one record per turn).

While a run is in progress, each finished turn is appended to ``NAME.run.partial`` and
``NAME.answers.jsonl.partial`` (run lines first, then the answers record, each flushed to disk). An interrupted run
resumes from the turns whose answers record is complete, provided it answers the same turns with the same settings
(:func:`resume_conflict`): otherwise the files would mix two experiments. When every turn is done, both files are
rewritten in topic order and renamed into place, so a file without ``.partial`` is always complete. A run holds
``NAME.lock`` meanwhile (:meth:`RunOutputs.locked`), so that two runs never write the same files.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cast.core.limits import bounded_turn
from cast.core.records import Conversation, ScoredPassage, TurnResult
from cast.core.registry import without_runtime_settings
from cast.errors import CastError, DataFormatError, excerpt
from cast.formats.runfile import (
    RUN_COLUMNS,
    check_tag,
    format_query,
    id_problem,
    read_run,
    split_columns,
    write_run,
)
from cast.formats.textfiles import RECORD_LINE_BYTES, RUN_LINE_BYTES, json_lines, parse_json, utf8_lines
from cast.infra.atomic import append_durably, remove_leftovers, write_lines_atomic


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

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``PREFIX.lock`` while writing: a second ``cast run`` on the same prefix would interleave its
        turns with ours. Temporary files that a killed run left behind are removed then."""
        lock_path = self.run_path.with_name(self.run_path.name.removesuffix(".run") + ".lock")
        self._refuse_links(lock_path)
        busy = (
            f"another cast run (PID {{holder}}) is writing {self.run_path} and {self.answers_path} (it holds "
            f"{lock_path}); wait for it to finish, or choose another --output"
        )
        with held_lock(lock_path, busy):
            for path in (self.run_path, self.answers_path):
                remove_leftovers(path)
            yield

    def completed(self) -> dict[str, dict[str, Any]]:
        """Answers records of turns finished by an earlier, interrupted run (and trims both files to them).

        A turn counts as finished when its answers record is whole; its run lines were written before it. Lines
        of unfinished turns, including one cut short by the interruption, are dropped from both files, and so
        are repeated records and run lines of one turn (left by two runs that shared the prefix).
        """
        self._refuse_links(self.run_partial, self.answers_partial)
        if not self.answers_partial.exists():
            self.run_partial.unlink(missing_ok=True)
            return {}
        done: dict[str, dict[str, Any]] = {}
        kept_records: list[str] = []
        for line in _whole_lines(self.answers_partial, RECORD_LINE_BYTES):
            try:
                record = parse_json(line, self.answers_partial)
            except DataFormatError:
                break  # a record cut short by the interruption: that turn is redone
            if not isinstance(record, dict) or not isinstance(record.get("qid"), str):
                break
            if record["qid"] not in done:
                done[record["qid"]] = record
                kept_records.append(line)
        write_lines_atomic(self.answers_partial, kept_records)
        kept: dict[tuple[str, str], str] = {}
        if self.run_partial.exists():
            for line in _whole_lines(self.run_partial, RUN_LINE_BYTES):
                fields = split_columns(line)
                if len(fields) == RUN_COLUMNS and fields[0] in done:
                    kept.setdefault((fields[0], fields[2]), line)
        write_lines_atomic(self.run_partial, kept.values())
        return done

    def _refuse_links(self, *paths: Path) -> None:
        for path in paths:
            if path.is_symlink():
                raise CastError(
                    f"{path} is a symbolic link, where cast run keeps its own file; remove it (cast run writes "
                    "only regular files there)"
                )

    def discard_partial(self) -> None:
        """Forget the turns of an interrupted run (to start over)."""
        self.run_partial.unlink(missing_ok=True)
        self.answers_partial.unlink(missing_ok=True)

    def append(self, qid: str, ranking: Sequence[ScoredPassage], record: dict[str, Any]) -> None:
        """Add one finished turn (its run lines, then its answers record)."""
        append_durably(self.run_partial, format_query(qid, _scored_ids(ranking), self.tag))
        append_durably(self.answers_partial, json.dumps(record, ensure_ascii=False) + "\n")

    def finalize(self, qid_order: Sequence[str]) -> None:
        """Write both files in ``qid_order`` from the turns appended, and move them into place."""
        records = [record for _, record in json_lines(self.answers_partial)]
        # No run lines at all where no turn retrieved a passage.
        rankings = (
            read_run(self.run_partial)
            if self.run_partial.exists() and self.run_partial.stat().st_size
            else {}
        )
        self._write({qid: list(scored.items()) for qid, scored in rankings.items()}, records, qid_order)
        self.discard_partial()

    def write_whole(
        self, turns: Sequence[tuple[str, Sequence[ScoredPassage], dict[str, Any]]], qid_order: Sequence[str]
    ) -> None:
        """Write both files at once from turns all answered (``(qid, ranking, record)``), in ``qid_order``: no
        partial files, for outputs made whole elsewhere (a sweep's point)."""
        rankings = {qid: list(_scored_ids(ranking)) for qid, ranking, _ in turns}
        self._write(rankings, [record for _, _, record in turns], qid_order)
        self.discard_partial()

    def _write(
        self,
        rankings: dict[str, list[tuple[str, float]]],
        records: list[dict[str, Any]],
        qid_order: Sequence[str],
    ) -> None:
        order = {qid: i for i, qid in enumerate(qid_order)}
        missing = set(order) - {r["qid"] for r in records}
        if missing:
            raise CastError(
                f"cannot finish the run: {len(missing)} turn(s) have no answer, e.g. {sorted(missing)[0]}"
            )
        records = sorted(records, key=lambda r: order[r["qid"]])
        if records and not any(rankings.get(r["qid"]) for r in records):
            raise CastError(
                f"no turn retrieved a passage (turn {records[0]['qid']}'s query was {excerpt(records[0].get('query'))}), "
                f"so {self.run_path} would have no lines: it is not written, nor {self.answers_path}. A query "
                "retrieves nothing when each of its words is a stop word, or in no passage of the index"
            )
        write_run(self.run_path, {qid: rankings[qid] for qid in order if qid in rankings}, self.tag)
        try:
            write_lines_atomic(self.answers_path, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        except BaseException:
            # Both or neither: a run file alone would look complete, and stop the resume that finishes it.
            self.run_path.unlink(missing_ok=True)
            raise


@contextmanager
def held_lock(lock_path: Path, busy: str) -> Iterator[None]:
    """Hold the kernel lock (``flock``) on ``lock_path`` (created, with our PID in it, and removed after), so that
    one left by a killed process is free again.

    Raises:
        CastError: another process holds it: ``busy``, its ``{holder}`` filled with that process's PID.
    """
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise CastError(busy.replace("{holder}", holder)) from None
        if os.path.samestat(os.fstat(fd), os.stat(lock_path, follow_symlinks=False)):
            break
        os.close(fd)  # the process before us removed the file after we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        os.close(fd)


def _whole_lines(path: Path, line_limit: int) -> Iterator[str]:
    """The lines of a partial output up to the first that an interruption cut short (no line end, or not UTF-8)."""
    try:
        for _, line in utf8_lines(path, line_limit):
            if not line.endswith("\n"):
                return
            yield line
    except DataFormatError:
        return


def _scored_ids(ranking: Sequence[ScoredPassage]) -> Iterator[tuple[str, float]]:
    """``(passage id, run score)`` of a ranking, refusing an id a run file cannot hold."""
    odd = next((p.id for p in ranking if id_problem(p.id) is not None), None)
    if odd is not None:  # an index built before ids were checked: stop now, not after the last turn
        raise CastError(
            f"the index returned passage id {odd!r}, which a run file cannot hold (it {id_problem(odd)}); rebuild "
            "the index with `cast index build`, which refuses such ids"
        )
    return zip((p.id for p in ranking), run_scores(ranking), strict=True)


def resume_conflict(
    done: Mapping[str, Mapping[str, Any]], utterances: Mapping[str, str], config: Mapping[str, Any]
) -> str | None:
    """Why the turns an interrupted run answered cannot be reused by this run, or None when they can.

    Args:
        done: the answers records of the interrupted run, by qid (:meth:`RunOutputs.completed`).
        utterances: the utterance of each turn this run answers, by qid.
        config: this run's stage settings, as its records store them (``Pipeline.describe()``).
    """

    # As read back from a record (tuples become lists); settings that change no output may differ.
    current = without_runtime_settings(json.loads(json.dumps(config)))
    for qid, record in done.items():
        if qid not in utterances:
            return f"it answered turn {qid}, which is not in these topics"
        if record.get("utterance") != utterances[qid]:
            return f"turn {qid} had another utterance"
        recorded = record.get("config")
        difference = setting_difference(
            without_runtime_settings(recorded) if isinstance(recorded, dict) else recorded, current
        )
        if difference is not None:
            return f"it answered turn {qid} with other settings ({difference})"
    return None


def setting_difference(old: Any, new: Any, key: str = "") -> str | None:
    """The first setting that differs between two stage descriptions, as ``key: old -> new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        for name in dict.fromkeys([*old, *new]):
            found = setting_difference(old.get(name), new.get(name), f"{key}.{name}" if key else name)
            if found is not None:
                return found
        return None
    return None if old == new else f"{key or 'config'}: {old!r} -> {new!r}"


def write_outputs(
    outputs: RunOutputs,
    described: dict[str, Any],
    conversations: list[Conversation],
    answer: Callable[[dict[str, dict[str, Any]], Callable[[TurnResult], None]], Any],
    *,
    overwrite: bool,
) -> list[str]:
    """Answer ``conversations`` into ``outputs``: resume the turns of an interrupted run made with the same
    topics and settings (``described``), refuse (or with ``overwrite`` discard) one made otherwise, write each
    turn as ``answer(done, write)`` gives it, and finalize the files (saying which turns retrieved nothing).
    Returns the qids written, in order."""

    done = outputs.completed()
    utterances = {t.qid: bounded_turn(t).utterance for c in conversations for t in c.turns}  # as recorded
    conflict = resume_conflict(done, utterances, described)
    if conflict is not None:
        # Resuming would mix two experiments in files that look complete.
        if not overwrite:
            raise CastError(
                f"{outputs.answers_partial} holds {len(done)} turn(s) of an interrupted run that this run cannot "
                f"continue: {conflict}. Run again with that run's topics and settings to resume it, or pass "
                "--overwrite to start over"
            )
        print(
            f"starting over: the interrupted run in {outputs.answers_partial} differs ({conflict})",
            file=sys.stderr,
        )
        outputs.discard_partial()
        done = {}
    if done:
        print(f"resuming: {len(done)} turn(s) already answered in {outputs.answers_partial}", file=sys.stderr)
    written = len(done)
    unranked = [qid for qid, record in done.items() if not record.get("top_ids")]

    def write(result: TurnResult) -> None:
        nonlocal written
        if not result.ranking:
            unranked.append(result.qid)
        try:
            outputs.append(result.qid, result.ranking, {**result.to_record(), "config": described})
        except OSError as e:  # a full disk, most often: say what is safe, not where Python was
            raise CastError(
                f"cannot write turn {result.qid} to {outputs.answers_partial}: {e.strerror}; the {written} turn(s) "
                "completed before it are kept there, and running the same command again resumes from them"
            ) from e
        written += 1

    answer(done, write)
    qids = list(dict.fromkeys(t.qid for c in conversations for t in c.turns))
    try:
        outputs.finalize(qids)
    except OSError as e:
        raise CastError(
            f"cannot write the finished outputs {outputs.run_path} and {outputs.answers_path}: {e.strerror}; all "
            f"{len(qids)} turns are kept in {outputs.answers_partial}, and running the same command again "
            "writes them"
        ) from e
    if unranked:
        print(
            f"note: {len(unranked)} turn(s) retrieved nothing (e.g. {unranked[0]}): {outputs.run_path} has no lines "
            "for them, they score 0 in `cast eval`, and their answers say none was found (a query retrieves nothing "
            "when each of its words is a stop word, or in no passage of the index)",
            file=sys.stderr,
        )
    return qids
