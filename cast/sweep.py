"""``cast sweep``: a grid of settings, one run per point, sharing the prepared turns where the points differ only
after re-ranking; one evaluation table against a baseline point.

Where every swept setting belongs to a stage after re-ranking (selector, summarizer, knowledge base: the turns
are prepared as far as entity linking; the linker: as far as re-ranking), the early stages run once
(:meth:`cast.conversation.runner.Runner.prepare`, saved as ``OUT/prepared.jsonl.gz``) and each point runs only
its later stages from them. Otherwise each point is a full run. Points run one after another in this process, or side by
side on Ray actors (each holding the pipeline's early stages once, and the prepared turns shipped once). Each
point's run and answers files are written whole, atomically, once its turns are answered (the files ``cast run``
writes with its settings): a sweep run again keeps the points it finished and redoes the others. The folder's report
(``report.md``, its CSVs, ``sweep.png``) is of the last sweep: one that would replace it with a report of fewer
points (another grid) is refused, unless ``--overwrite``.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cast.conversation.prepared import Prepared
from cast.conversation.ray_runner import RayRunner
from cast.conversation.runner import LocalRunner, Runner
from cast.conversation.walker import answer_conversations
from cast.core.pipeline import (
    STOP_POINTS,
    Pipeline,
    check_config,
    configured_stage,
    kinds_after,
    slots_after,
    useful_stop,
)
from cast.core.records import Conversation, TurnResult
from cast.core.registry import build_stage
from cast.errors import CastError, ConfigError, DataFormatError
from cast.evaluate import report as rep
from cast.evaluate.experiment import evaluate_answer_files, evaluate_runs
from cast.evaluate.plots import sweep_plot
from cast.formats.outputs import RunOutputs, held_lock, setting_difference
from cast.formats.textfiles import RECORD_BYTES, read_json
from cast.formats.topics import load_topics, topics_digest
from cast.index.record import index_identity
from cast.infra.atomic import PARTIAL, write_text_atomic
from cast.infra.cluster import RayOptions, map_in_order, require_path
from cast.infra.resources import Resources

PREPARED_FILE = "prepared.jsonl.gz"
LOCK_FILE = "sweep.lock"
# The base config a sweep's folder holds points of: points of another base config must not join them.
MANIFEST_FILE = "sweep.json"
REPORT_FILE = "report.md"


@dataclass(frozen=True)
class Point:
    """One point of the grid: its name (``gamma=0.25,threshold=0``) and its ``--set`` overrides."""

    name: str
    overrides: tuple[str, ...]

    @property
    def file_name(self) -> str:
        """The point's output prefix within the sweep's folder (its name, safe as a file name)."""
        return re.sub(r"[^A-Za-z0-9._=,+-]", "_", self.name)


def grid_points(grid: Sequence[str]) -> list[Point]:
    """Every combination of the values of ``grid`` (``KEY=V1,V2,...`` each), in order, the last key fastest.

    Example:
        >>> [p.name for p in grid_points(["selector.gamma=0,0.5", "summarizer.words=50"])]
        ['gamma=0,words=50', 'gamma=0.5,words=50']
    """
    axes: list[tuple[str, list[str]]] = []
    for spec in grid:
        key, sep, values = spec.partition("=")
        key = key.strip()
        chosen = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(chosen):
            raise ConfigError(f"--grid {spec!r}: give KEY=VALUE1,VALUE2,... e.g. selector.gamma=0,0.25,0.5")
        if key in (k for k, _ in axes):
            raise ConfigError(f"--grid names {key} twice: give all its values once, comma-separated")
        if len(set(chosen)) != len(chosen):
            raise ConfigError(f"--grid {spec!r} repeats a value")
        axes.append((key, chosen))
    if not axes:
        raise ConfigError("give at least one --grid KEY=VALUE1,VALUE2,...")
    # Short names where the last parts of the keys tell the axes apart.
    last = [key.rsplit(".", 1)[-1] for key, _ in axes]
    names = last if len(set(last)) == len(last) else [key for key, _ in axes]
    return [
        Point(
            ",".join(f"{name}={value}" for name, value in zip(names, values, strict=True)),
            tuple(f"{key}={value}" for (key, _), value in zip(axes, values, strict=True)),
        )
        for values in itertools.product(*(values for _, values in axes))
    ]


def stop_point(points: Sequence[Point], configs: Sequence[dict[str, Any]]) -> str | None:
    """Where a pass shared by every point can stop (``link``, ``rerank``), or None: the points differ earlier."""

    # The points share the stages before the first one a swept setting belongs to (the knowledge base is the
    # selector's): the latest stop point before it.
    kinds = {override.split("=", 1)[0].split(".", 1)[0] for point in points for override in point.overrides}
    shared = [stop for stop in STOP_POINTS if kinds <= kinds_after(stop)]
    if not shared or any(c.get("history_responses") == "answers" for c in configs):
        return None
    # Selectors build cheaply (their knowledge base loads at first use); O needs entities only for EP.
    selectors = [build_stage("selector", c["selector"], Resources(c)) for c in configs]
    return useful_stop(any(getattr(selector, "needs_entities", True) for selector in selectors), shared[-1])


class PointRunner:
    """Runs sweep points: a worker that builds the base config's pipeline once where it is first used, and runs
    each point from the prepared turns (only its later stages built), or as a full run where there are none.

    Args:
        config: the sweep's base config (every point's config differs from it only in the swept settings).
        conversations: the topics.
        prepared: the turns every point shares, or None.
    """

    def __init__(self, config: dict[str, Any], conversations: list[Conversation], prepared: Prepared | None):
        self.config = config
        self.conversations = conversations
        self.prepared = prepared
        self._built: tuple[Pipeline, Resources] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_built": None}

    def base(self) -> tuple[Pipeline, Resources]:
        if self._built is None:
            if self.config.get("index"):
                require_path(self.config["index"], "the index", "--index")
            resources = Resources(self.config)
            self._built = (Pipeline.from_config(self.config, resources), resources)
        return self._built

    def __call__(self, item: tuple[str, dict[str, Any]]) -> tuple[dict[str, Any], list[TurnResult]]:
        """The description and results of the point ``(name, config)``."""

        _, config = item
        if self.prepared is None:
            pipeline = Pipeline.from_config(config)
            return pipeline.describe(), answer_conversations(pipeline, self.conversations)
        base, resources = self.base()
        # The selector builds the knowledge base from its resources: another one needs resources of its own.
        other_knowledge = config.get("knowledge_base") != self.config.get("knowledge_base")
        if other_knowledge:
            resources = Resources(config)
        # The stages after the earliest stop point whose sections (or those they build from) differ, rebuilt.
        later: dict[str, Any] = {
            slot.kind: configured_stage(slot, config, resources)
            for slot in slots_after(STOP_POINTS[0])
            if any(config.get(kind) != self.config.get(kind) for kind in (slot.kind, *slot.uses))
        }
        pipeline = base.with_stages(config, **later)
        return pipeline.describe(), answer_conversations(pipeline, self.conversations, prepared=self.prepared)


@dataclass(frozen=True)
class SweepOutputs:
    """Where each point's run and answers files are, by point name, and what was shared."""

    runs: dict[str, Path]
    answers: dict[str, Path]
    stop_after: str | None


def run_sweep(
    points: Sequence[Point],
    config_of: Callable[[Point], dict[str, Any]],
    base_config: dict[str, Any],
    conversations: list[Conversation],
    out: Path,
    *,
    ray: RayOptions | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> SweepOutputs:
    """Run every point of the grid into ``out`` (``<point>.run``, ``<point>.answers.jsonl``).

    Raises:
        CastError: ``out`` is a file or holds a sweep of another base config, topics or index, or a point of the
            same name with other settings (give --overwrite); a point's config is not valid; another sweep writes
            in ``out``.
    """

    with sweep_lock(out):
        inputs = sweep_inputs(base_config, conversations)
        kept = _check_manifest(out / MANIFEST_FILE, base_config, inputs, points, overwrite)
        configs = {point.name: config_of(point) for point in points}
        _check_configs(configs)
        stop_after = stop_point(points, list(configs.values()))
        outputs = {
            point.name: RunOutputs(out / point.file_name, _tag(point), overwrite=True) for point in points
        }
        pending = [p for p in points if p.file_name not in kept or not _finished(outputs[p.name])]
        for point in points:
            if point not in pending:
                print(f"kept: {outputs[point.name].run_path} (finished earlier)", file=sys.stderr)
        runner = PointRunner(base_config, conversations, None)
        if pending and stop_after is not None:
            started = time.perf_counter()
            # The pipeline that prepares the shared turns here runs the points too; on Ray, the actors' do.
            shared: Runner = RayRunner(base_config, ray) if ray is not None else LocalRunner(runner.base()[0])
            with closing(shared):
                runner.prepared = _prepare(shared, conversations, stop_after, out / PREPARED_FILE, progress)
            print(f"shared pass: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        items = [(p.name, configs[p.name]) for p in pending]
        started = time.perf_counter()
        qids = list(dict.fromkeys(t.qid for c in conversations for t in c.turns))
        for (name, _), (described, results) in map_in_order(runner, items, ray):
            target = outputs[name]
            described = {**described, "topics": inputs["topics"]}  # as `cast run` records it
            with target.locked():  # a point is written whole, once all its turns are answered
                target.write_whole(
                    [(r.qid, r.ranking, {**r.to_record(), "config": described}) for r in results], qids
                )
            print(f"wrote {target.run_path} and {target.answers_path} ({name})", file=sys.stderr)
        if items:
            print(f"points: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return SweepOutputs(
            runs={p.name: outputs[p.name].run_path for p in points},
            answers={p.name: outputs[p.name].answers_path for p in points},
            stop_after=stop_after,
        )


@contextmanager
def sweep_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/sweep.lock`` (two sweeps in one folder would mix their points), and remove the temporary files a
    killed sweep left there.

    Raises:
        CastError: ``out`` is a file, or another sweep holds the lock.
    """

    if out.exists() and not out.is_dir():
        raise CastError(f"--output {out} is a file; give a folder for the sweep's runs")
    out.mkdir(parents=True, exist_ok=True)
    busy = f"another cast sweep (PID {{holder}}) is writing in {out}; wait for it to finish, or choose another --output"
    with held_lock(out / LOCK_FILE, busy):
        for leftover in out.glob(f".*{PARTIAL}*"):
            if leftover.is_file() and not leftover.is_symlink():
                leftover.unlink()
        yield


def _check_configs(configs: dict[str, dict[str, Any]]) -> None:
    """Every point's config checked now (a mistyped --grid key fails before the shared pass, not after it)."""

    for name, config in configs.items():
        try:
            check_config(config, Resources(config))
        except CastError as e:
            raise CastError(f"point {name}: {e}") from e


def sweep_inputs(config: dict[str, Any], conversations: list[Conversation]) -> dict[str, Any]:
    """What a sweep's points are made from besides their settings: the topics' digest and the index's identity."""

    return {
        "topics": topics_digest(conversations),
        "index": index_identity(config["index"]) if config.get("index") else None,
    }


def _check_manifest(
    path: Path, config: dict[str, Any], inputs: dict[str, Any], points: Sequence[Point], overwrite: bool
) -> dict[str, list[str]]:
    """Refuse to add points to a folder holding a sweep of another base config or other inputs, or a point of
    the same name made with other settings, or to replace the folder's report with one that lacks some of its
    points (``--overwrite``: replace them); record this sweep's. Returns the points recorded before with the same
    settings (their files, if finished, are kept), by file name."""

    names = [p.file_name for p in points]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CastError(
            f"--grid gives two points the file name {repeated[0]}: give values that differ in letters"
        )
    current = json.loads(json.dumps({"config": config, "inputs": inputs}))  # as read back
    recorded: dict[str, list[str]] = {}
    if path.is_file() and not overwrite:
        try:
            manifest = read_json(path, RECORD_BYTES, "sweep manifest")
            recorded = dict(manifest.get("points") or {})
        except (DataFormatError, AttributeError, TypeError, ValueError) as e:
            raise CastError(f"{path} is not a sweep manifest ({e}); choose another --output") from e
        for what, key in (("another config", "config"), ("other inputs", "inputs")):
            old = manifest.get(key)  # none in a manifest of an older version
            difference = setting_difference(old, current[key], "" if isinstance(old, dict) else key)
            if difference is not None:
                raise CastError(
                    f"{path.parent} holds a sweep of {what} ({difference}): choose another --output, or pass "
                    "--overwrite to run every point again"
                )
        for point in points:
            made = recorded.get(point.file_name, list(point.overrides))
            if made != list(point.overrides):
                raise CastError(
                    f"{path.parent} holds a point {point.file_name} made with {', '.join(map(str, made))}, not "
                    f"{', '.join(point.overrides)}: choose another --output, or pass --overwrite"
                )
        reported = manifest.get("report")  # none in a manifest of an older version
        dropped = [n for n in reported if n not in names] if isinstance(reported, list) else []
        if dropped and (path.parent / REPORT_FILE).is_file():
            raise CastError(
                f"{path.parent} holds the report of another sweep, with point(s) {', '.join(map(str, dropped[:3]))} "
                f"that this one lacks: its {REPORT_FILE}, CSVs and plot would be replaced. Choose another --output, "
                "give a grid with those points too, or pass --overwrite"
            )
    points_made = {**recorded, **{p.file_name: list(p.overrides) for p in points}}
    manifest_now = {**current, "points": points_made, "report": names}
    write_text_atomic(path, json.dumps(manifest_now, indent=2, sort_keys=True) + "\n")
    return recorded


def _tag(point: Point) -> str:
    return "sweep:" + re.sub(r"\s", "_", point.name)


def _finished(outputs: Any) -> bool:
    return bool(outputs.run_path.is_file() and outputs.answers_path.is_file())


def _prepare(
    runner: Runner, conversations: list[Conversation], stop_after: str, path: Path, progress: bool
) -> Prepared:
    """The turns every point shares: read back from ``path`` if an earlier sweep prepared them with these early
    stages, else prepared now by ``runner`` and saved there."""
    stored = Prepared.load(path) if path.is_file() else None
    if stored is not None:
        if (
            stored.stop_after == stop_after
            and stored.difference(runner.early_description(stop_after)) is None
        ):
            print(f"reusing the prepared turns in {path}", file=sys.stderr)
            return stored
        print(f"preparing again: {path} was made with other early stages", file=sys.stderr)
    # Points read the candidates' texts; below them a run file needs ids and scores.
    prepared = runner.prepare(conversations, stop_after=stop_after, progress=progress).compact(
        runner.candidates
    )
    prepared.save(path)
    return prepared


def sweep_report(
    points: Sequence[Point],
    outputs: SweepOutputs,
    out: Path,
    *,
    qrels: Path | None = None,
    topics: Path | None = None,
    index: str | Path | None = None,
    baseline: str | None = None,
    correction: str | None = None,
) -> Path:
    """``out/report.md`` (tables with significance against the ``baseline`` point, the first by default), the
    tables as CSVs and ``out/sweep.png``: retrieval measures where ``qrels`` are given; answer measures against
    the topics' written responses where they have them, else against the passages the qrels grade highly (their
    texts read from ``index``).

    Raises:
        CastError: ``baseline`` names no point, or there is nothing to evaluate against.
    """
    import pandas as pd

    with sweep_lock(out):
        names = {p.name: p.file_name for p in points}
        base = names[baseline_point(points, baseline).name]
        with_responses = topics is not None and any(t.response for c in load_topics(topics) for t in c.turns)
        if qrels is None and not with_responses:
            raise CastError("a sweep's report needs --qrels, or topics with written responses (CAsT 2022)")
        evaluations: dict[str, Any] = {}
        if qrels is not None:
            evaluations["retrieval"] = evaluate_runs([outputs.runs[p.name] for p in points], qrels)
        notes = []
        try:
            evaluations["answers"] = evaluate_answer_files(
                [outputs.answers[p.name] for p in points],
                topics=topics if with_responses else None,
                qrels=None if with_responses else qrels,
                index=None if with_responses else index,
                progress=False,
            )
        except CastError as e:  # e.g. qrels without a passage graded high enough to be a reference
            if "retrieval" not in evaluations:
                raise
            notes.append(f"Answers not scored: {e}")
        sections = [
            f"# Sweep over {', '.join(_axes(points))}",
            "",
            f"Baseline point: {base}.",
            "",
            *notes,
            "",
        ]
        means = []
        for kind, found in evaluations.items():
            comparison = rep.compare({n: e.per_turn for n, e in found.items()}, base, correction)
            rep.write_csv(out / f"{kind}.csv", comparison.means)
            rep.write_csv(out / f"{kind}_tests.csv", comparison.tests)
            sections.append(rep.comparison_section(kind.capitalize(), comparison, []))
            means.append(comparison.means)
        table = pd.concat(means, axis=1).loc[[names[p.name] for p in points]]
        for axis in _axes(points):
            table[axis] = [dict(o.split("=", 1) for o in p.overrides)[axis] for p in points]
        plot = sweep_plot(
            table.reset_index(drop=True), _axes(points), ("nDCG@3", "ROUGE-L", "METEOR"), out / "sweep.png"
        )
        sections += ["## Figure", "", f"![sweep]({plot.name})", ""]
        rep.write_text(out / REPORT_FILE, "\n".join(sections))
        return out / REPORT_FILE


def baseline_point(points: Sequence[Point], baseline: str | None) -> Point:
    """The point named ``baseline`` (the first point if None).

    Raises:
        CastError: no point has that name.
    """
    found = next((p for p in points if p.name == (baseline or points[0].name)), None)
    if found is None:
        raise CastError(
            f"--baseline {baseline!r} is not a point of the grid; points: {', '.join(p.name for p in points)}"
        )
    return found


def _axes(points: Sequence[Point]) -> list[str]:
    return [override.split("=", 1)[0] for override in points[0].overrides]
