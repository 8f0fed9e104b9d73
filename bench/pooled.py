"""The pooled development benchmark: every judged turn with passage texts and a written response, over one collection.

Datasets (``--data``, or the environment variable ``CAST_DATA``, holds them as ``../shared/data`` does):

* ``cast2022``: TREC CAsT 2022 topics 132-140 (108 turns with written responses; 83 judged with
  ``cast2022.provenance.qrel``);
* ``ikat2023-train`` and ``ikat2023-test``: TREC iKAT 2023 train topics and test topics 9-14 (242 turns with
  written responses; 197 judged with their ``response_provenance``).

The collection is the 820k Wikipedia passages plus every dataset's provenance passages, built once (about 25
minutes on 2 cores)::

    D=../shared/data
    cast index build --index indexes/pooled-dev --input $D/wiki/enwiki-2013-core.jsonl.gz \\
        $D/cast/2022-dev/provenance_passages.jsonl $D/ikat/2023_train_topics_psg_text.jsonl \\
        $D/ikat/2023_test_topics_9-14_psg_text.jsonl
    cast entity dictionary --index indexes/pooled-dev --input (the same four files)
    cast entity kb

``run`` answers every dataset's turns with one config (``cast run``'s outputs in ``--out``: an interrupted
benchmark resumes, a finished dataset is reused when made with the same settings), scores retrieval (MRR,
nDCG@3, R@100 over judged turns) and answers (ROUGE-1, ROUGE-L, METEOR, BLEU-1, groundedness over turns with a
written response) per dataset and pooled, with a reader's form checks on every answer (the share of answers with a
cut sentence, boilerplate, a sentence a reader would not call one, a sentence leaning on what came before it with
nothing before it, or repeating an earlier answer of its conversation; :mod:`cast.evaluate.form`) and their
length, writes ``--out/per-turn.tsv``, and tests each measure against the baseline file (per-turn scores of the profile's current defaults, ``bench/baselines/<config>.tsv``): paired
t-test and randomisation test, Holm-corrected over the measures of each row. It names every measure that got
significantly worse and exits with status 3 when a headline measure (MRR, nDCG@3, ROUGE-L, METEOR) did, pooled.

``compare`` tests per-turn files against the first, and with several candidates adds the leave-one-topic-out row
the rule for changing a default asks for (README, "Benchmarks").

Usage:
    .venv/bin/python bench/pooled.py run --index indexes/pooled-dev --out runs/pooled/offline
    .venv/bin/python bench/pooled.py run --index indexes/pooled-dev --out runs/pooled/fp32 \\
        --set encoder.quantize=none
    .venv/bin/python bench/pooled.py run --index indexes/pooled-dev --out runs/pooled/offline --write-baseline
    .venv/bin/python bench/pooled.py compare runs/pooled/offline/per-turn.tsv runs/pooled/fp32/per-turn.tsv
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

# numpy's OpenBLAS worker threads crash the process (SIGSEGV) once the JVM runs; set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cast.benchmark.datasets import DATASETS
from cast.benchmark.pooled import (
    answer_datasets,
    leave_one_topic_out,
    print_summary,
    read_per_turn,
    score_datasets,
    tests_against,
    write_per_turn,
)
from cast.benchmark.scripts import DATA, REPO, documented_parser, existing_path, load_average, run
from cast.conversation.runner import LocalRunner
from cast.core.config import load_config
from cast.core.pipeline import Pipeline
from cast.errors import CastError

BASELINES = REPO / "bench" / "baselines"
REGRESSION_STATUS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = documented_parser(__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("run", help="answer and score every dataset with one config")
    bench.add_argument("--config", default="offline", help="pipeline config (default: offline)")
    bench.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    bench.add_argument(
        "--index",
        type=existing_path,
        default=os.environ.get("CAST_POOLED_INDEX"),
        required="CAST_POOLED_INDEX" not in os.environ,
        help="the pooled collection's index (default: $CAST_POOLED_INDEX)",
    )
    bench.add_argument(
        "--data", type=existing_path, default=DATA, help="the data folder (default: %(default)s)"
    )
    bench.add_argument(
        "--out", type=Path, required=True, help="folder for the runs, answers and per-turn.tsv"
    )
    bench.add_argument(
        "--datasets", nargs="+", choices=[d.name for d in DATASETS], help="only these datasets (default: all)"
    )
    bench.add_argument(
        "--max-turns",
        type=int,
        metavar="N",
        help="only each dataset's first N distinct turns, with the turns before them in their conversation (for "
        "stages too slow for the whole benchmark; the baseline test then covers those turns only)",
    )
    bench.add_argument(
        "--prepared",
        type=Path,
        metavar="DIR",
        help="DIR/<dataset>.jsonl.gz: turns prepared as far as re-ranking, read where present (their early stages "
        "must be this config's) and written where not, so that variants of the later stages (linker, selector, "
        "summarizer) rerun no retrieval or re-ranking",
    )
    bench.add_argument(
        "--baseline",
        type=Path,
        help="per-turn baseline file (default: bench/baselines/<config>.tsv, where it exists)",
    )
    bench.add_argument(
        "--write-baseline",
        action="store_true",
        help="write this run's per-turn scores as the config's baseline file (the rule: README, Benchmarks)",
    )
    compare = commands.add_parser("compare", help="test per-turn files against the first")
    compare.add_argument(
        "files", nargs="+", type=existing_path, help="per-turn.tsv files; the first is the baseline"
    )
    compare.add_argument("--names", nargs="+", help="a name for each file (default: its folder's name)")
    return parser.parse_args(argv)


def run_benchmark(args: argparse.Namespace) -> int:
    datasets = [d for d in DATASETS if not args.datasets or d.name in args.datasets]
    baseline_path = args.baseline or BASELINES / f"{Path(args.config).stem}.tsv"
    if args.baseline is not None and not args.baseline.is_file():
        raise CastError(f"no baseline file {args.baseline}")
    started = time.perf_counter()
    config = load_config(args.config, [f"index={args.index}", *args.overrides])
    runner = LocalRunner(Pipeline.from_config(config, progress=True))
    answer_datasets(runner, args.data, args.out, datasets, max_turns=args.max_turns, prepared=args.prepared)
    answered = time.perf_counter() - started
    frame = score_datasets(args.data, args.out, args.index, datasets, max_turns=args.max_turns)
    write_per_turn(args.out / "per-turn.tsv", frame)
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    turns = int(frame["ROUGE-L"].notna().sum())
    print(
        f"\n{turns} turns answered and scored in {time.perf_counter() - started:.0f} s (answering {answered:.0f} s, "
        f"{answered / max(turns, 1):.2f} s/turn where not kept from an earlier run); peak memory "
        f"{peak / 2**20:.2f} GB; {load_average()}"
    )
    baseline = read_per_turn(baseline_path) if baseline_path.is_file() and not args.write_baseline else None
    title = f"{args.config} {' '.join(args.overrides)}".strip() + f" ({args.out / 'per-turn.tsv'})"
    if baseline is not None:
        title += f", tested against {baseline_path}"
    worse = print_summary(title, frame, tests_against(frame, baseline) if baseline is not None else None)
    if args.write_baseline:
        BASELINES.mkdir(exist_ok=True)
        write_per_turn(baseline_path, frame)
        print(f"wrote {baseline_path}")
    if worse:
        print(
            f"regression: pooled {', '.join(worse)} significantly worse than {baseline_path}", file=sys.stderr
        )
        return REGRESSION_STATUS
    return 0


def compare_files(args: argparse.Namespace) -> int:
    names = args.names or [path.parent.name for path in args.files]
    if len(names) != len(args.files) or len(set(names)) != len(names):
        raise CastError("give one distinct name per file (--names)")
    systems = {name: read_per_turn(path) for name, path in zip(names, args.files, strict=True)}
    baseline = names[0]
    print_summary(f"{baseline} (baseline)", systems[baseline], None)
    for name in names[1:]:
        print_summary(name, systems[name], tests_against(systems[name], systems[baseline]))
    if len(names) > 1:
        pooled, chosen = leave_one_topic_out(systems, baseline)
        print_summary("leave-one-topic-out choice", pooled, tests_against(pooled, systems[baseline]))
        counts = {name: sum(1 for c in chosen.values() if c == name) for name in names}
        print("  topics answered by: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_benchmark(args) if args.command == "run" else compare_files(args)


if __name__ == "__main__":
    sys.exit(run(main))
