"""Scaling: how the costs grow with the collection, and what Ray workers buy on one machine.

``growth``: collections of ``--scales`` times a base collection (the first ``--base-passages`` passages of
``--input``; below 1x its first passages, above 1x whole copies whose passage ids are re-identified as
``<id>~<copy>``, titles kept, so the copies read as more passages of the same articles). Each is written to
``--work`` as JSON lines, streamed (the text is never held in memory), then measured as subprocesses: ``cast
index build`` and ``cast entity dictionary`` (wall-clock seconds and the peak resident memory of the process,
``os.wait4``), and query latency (``latency``: the first stage per query, and whole turns of the pipeline, over
``--topics``).

``throughput``: the same ``cast run`` as one process, on Ray with 1 worker and with 2 (each a subprocess with an
empty cache; the first ``--conversations`` conversations of ``--topics``), the wall-clock time of each, the throughput ratio of 2
workers to 1, the driver's overhead against the single process (Ray's start-up, measured alone, reported apart)
and whether the three run files are byte-identical.

Usage:
    .venv/bin/python bench/scale.py growth --base-passages 20000 --scales 0.25 1 4 --work /tmp/scale
    .venv/bin/python bench/scale.py throughput --conversations 6 --work /tmp/scale
    .venv/bin/python bench/scale.py latency --index DIR --topics FILE   # (what growth runs per collection)
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from cast.benchmark.scripts import (
    DEFAULT_INDEX,
    DEV_2022_PASSAGES,
    DEV_2022_TOPICS,
    WIKI,
    existing_path,
    load_average,
    run,
    run_measured,
)

CAST = [sys.executable, "-m", "cast.cli"]


def measured(command: list[str], log: Path) -> tuple[float, int]:
    """Run ``command`` (output to ``log``): its wall-clock seconds and peak resident memory in bytes."""
    seconds, _, rss = run_measured(command, log, f"scale: {' '.join(command[2:5])}...")
    return seconds, rss


def write_scaled(inputs: list[Path], base: int | None, scale: float, path: Path) -> int:
    """Write ``scale`` times the first ``base`` passages of ``inputs`` to ``path``; the number written."""
    from cast.index.collections import read_passages

    if scale > 1 and scale != int(scale):
        sys.exit(f"scale: scales above 1 are whole numbers of copies, got {scale}")
    if scale < 1:
        total = base if base is not None else sum(1 for _ in read_passages(inputs))
        copies, limit = 1, round(total * scale)
    else:
        copies, limit = int(scale), base
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for copy in range(copies):
            for p in itertools.islice(read_passages(inputs), limit):
                record = {"id": p.id if copy == 0 else f"{p.id}~{copy}", "title": p.title, "contents": p.text}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    return written


def growth(args: argparse.Namespace) -> int:
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"# growth: base {args.base_passages or 'all'} passages of {', '.join(map(str, args.input))}")
    print(f"# {load_average()}")
    header = ["scale", "passages", "index s", "index MB", "dictionary s", "dictionary MB"]
    header += ["first stage ms/query", "turn s", "turns"]
    print(" | ".join(header))
    for scale in args.scales:
        collection = args.work / f"scale-{scale:g}.jsonl"
        passages = write_scaled(args.input, args.base_passages, scale, collection)
        index = args.work / f"ix-{scale:g}"
        build = [*CAST, "index", "build", "--input", str(collection), "--index", str(index), "--overwrite"]
        index_s, index_rss = measured(
            [*build, "--threads", str(args.threads)], args.work / f"index-{scale:g}.log"
        )
        dictionary = [*CAST, "entity", "dictionary", "--index", str(index), "--input", str(collection)]
        dictionary_s, dictionary_rss = measured(dictionary, args.work / f"dictionary-{scale:g}.log")
        latency_log = args.work / f"latency-{scale:g}.json"
        command = [sys.executable, __file__, "latency", "--index", str(index), "--topics", str(args.topics)]
        command += [
            "--config",
            args.config,
            "--out",
            str(latency_log),
            "--conversations",
            str(args.conversations),
        ]
        measured([*command, *(f"--set={s}" for s in args.overrides)], args.work / f"latency-{scale:g}.log")
        latency = json.loads(latency_log.read_text())
        row = [f"{scale:g}x", f"{passages:,}", f"{index_s:.1f}", f"{index_rss / 2**20:.0f}"]
        row += [f"{dictionary_s:.1f}", f"{dictionary_rss / 2**20:.0f}"]
        row += [f"{latency['first_stage_ms']:.1f}", f"{latency['turn_s']:.3f}", str(latency["turns"])]
        print(" | ".join(row), flush=True)
        if not args.keep:
            collection.unlink()
    return 0


def latency(args: argparse.Namespace) -> int:
    """First-stage milliseconds per query (median over every turn's manual rewrite in ``--topics``, each query
    alone, after a warm-up pass) and whole-turn seconds (wall-clock over answering the first
    ``--conversations``, models loaded before, with an empty cache beside the index)."""
    from cast.conversation.walker import answer_conversations
    from cast.core.config import load_config
    from cast.core.pipeline import Pipeline
    from cast.formats.topics import load_topics

    # A cache of its own: another collection's cached passage embeddings would make the turns look cheap.
    cache = args.index.with_name(args.index.name + ".cache")
    config = load_config(args.config, [f"index={args.index}", f"cache_dir={cache}", *args.overrides])
    conversations = load_topics(args.topics)
    pipeline = Pipeline.from_config(config)
    queries = list(dict.fromkeys(t.manual_rewrite or t.utterance for c in conversations for t in c.turns))
    for query in queries:  # the searcher's start-up and the JVM's compilation are not a query's cost
        pipeline.first_stage.search_batch([query])
    times = []
    for query in queries:
        started = time.perf_counter()
        pipeline.first_stage.search_batch([query])
        times.append(time.perf_counter() - started)
    embed = getattr(pipeline.reranker, "embed", None)
    if embed is not None:  # a bi-encoder's one-off export of its model (into the cache) is not a turn's cost
        embed(["warm-up"])
    started = time.perf_counter()
    turns = len(answer_conversations(pipeline, conversations[: args.conversations]))
    turn_s = (time.perf_counter() - started) / turns
    figures = {"first_stage_ms": 1000 * statistics.median(times), "turn_s": turn_s, "turns": turns}
    args.out.write_text(json.dumps(figures))
    return 0


def throughput(args: argparse.Namespace) -> int:
    args.work.mkdir(parents=True, exist_ok=True)
    topics = args.work / "topics.json"
    conversations = json.loads(args.topics.read_text(encoding="utf-8"))
    topics.write_text(json.dumps(conversations[: args.conversations]), encoding="utf-8")
    startup_s, _ = measured(
        [
            sys.executable,
            "-c",
            "import ray; ray.init(include_dashboard=False, num_cpus=2)\n"
            "@ray.remote\ndef f(): return 1\nray.get(f.remote()); ray.shutdown()",
        ],
        args.work / "ray-startup.log",
    )
    base = [*CAST, "run", "--config", args.config, "--index", str(args.index), "--topics", str(topics)]
    base += [f"--set={s}" for s in args.overrides]
    modes = {"single process": [], "ray, 1 worker": ["--ray", "--ray-workers", "1"]}
    modes["ray, 2 workers"] = ["--ray", "--ray-workers", "2"]
    seconds, runs = {}, {}
    from cast.core.config import load_config

    # Each mode starts from an empty cache (the first would otherwise embed and link for the others), holding
    # only the encoder exports, whose one-off building is no turn's cost.
    exports = Path(load_config(args.config, args.overrides).get("cache_dir") or "").expanduser() / "encoders"
    for number, (mode, extra) in enumerate(modes.items()):
        prefix, cache = args.work / f"run-{number}", args.work / f"cache-{number}"
        shutil.rmtree(cache, ignore_errors=True)
        if exports.is_dir():
            shutil.copytree(exports, cache / "encoders")
        command = [*base, f"--set=cache_dir={cache}", "--output", str(prefix), "--overwrite", *extra]
        seconds[mode], _ = measured(command, args.work / f"run-{number}.log")
        runs[mode] = Path(f"{prefix}.run").read_bytes()
    turns = sum(1 for line in Path(f"{args.work / 'run-0'}.answers.jsonl").open())
    print(f"# throughput: {turns} turns of {args.conversations} conversations, config {args.config}")
    print(f"# {load_average()}; Ray start-up alone (init + one task + shutdown): {startup_s:.1f} s")
    print("mode | wall s | s/turn")
    for mode, wall in seconds.items():
        print(f"{mode} | {wall:.1f} | {wall / turns:.3f}")
    one, two, plain = seconds["ray, 1 worker"], seconds["ray, 2 workers"], seconds["single process"]
    print(f"throughput ratio, 2 workers / 1 worker: {one / two:.2f}")
    overhead = (one - startup_s - plain) / plain
    print(f"driver overhead with 1 worker against the single process, Ray start-up excluded: {overhead:+.1%}")
    same = len(set(runs.values())) == 1
    print(f"run files byte-identical across the three: {'yes' if same else 'NO'}")
    return 0 if same else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def common(command: argparse.ArgumentParser) -> None:
        command.add_argument("--topics", type=existing_path, default=str(DEV_2022_TOPICS))
        command.add_argument("--config", default="offline")
        command.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
        command.add_argument(
            "--conversations", type=int, default=6, help="the first N conversations of --topics"
        )

    grow = commands.add_parser("growth", help="cost growth over scaled copies of a collection")
    grow.add_argument("--input", type=existing_path, nargs="+", default=[str(WIKI), str(DEV_2022_PASSAGES)])
    grow.add_argument("--base-passages", type=int, help="the 1x collection's passages (default: all)")
    grow.add_argument("--scales", type=float, nargs="+", default=[0.25, 1, 4, 16])
    grow.add_argument("--threads", type=int, default=2, help="indexing threads")
    grow.add_argument("--work", type=Path, required=True, help="a folder for the collections and indexes")
    grow.add_argument("--keep", action="store_true", help="keep the scaled collections")
    common(grow)
    grow.set_defaults(func=growth)

    lat = commands.add_parser("latency", help="first-stage and whole-turn latency on one index")
    lat.add_argument("--index", type=existing_path, required=True)
    lat.add_argument("--out", type=Path, required=True, help="the JSON file of figures to write")
    common(lat)
    lat.set_defaults(func=latency)

    tput = commands.add_parser("throughput", help="cast run in one process, on 1 and on 2 Ray workers")
    tput.add_argument("--index", type=existing_path, default=DEFAULT_INDEX)
    tput.add_argument("--work", type=Path, required=True, help="a folder for the runs")
    common(tput)
    tput.set_defaults(func=throughput)

    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(run(main))
