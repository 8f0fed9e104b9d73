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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# numpy's OpenBLAS worker threads crash the process (SIGSEGV) once the JVM runs; set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import DATA, documented_parser, existing_path, load_average, run  # noqa: E402

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

RETRIEVAL = ("MRR", "nDCG@3", "R@100")
ANSWERS = ("ROUGE-1", "ROUGE-L", "METEOR", "BLEU-1", "grounded")
MEASURES = (*RETRIEVAL, *ANSWERS)
# A reader's form checks (cast.evaluate.form), per turn 100 where the answer is at fault, and its length in words:
# printed beside the measures; per-turn files written before them lack these columns.
FORM = ("words", "cut", "boilerplate", "malformed", "dangling", "repeat")
HEADLINE = ("MRR", "nDCG@3", "ROUGE-L", "METEOR")
BASELINES = REPO / "bench" / "baselines"
POOLED = "pooled"
REGRESSION_STATUS = 3
# How per-turn files record each score (six significant digits).
RECORDED_FORMAT = "%.6g"


@dataclass(frozen=True)
class Dataset:
    """One benchmark dataset: a topics file and how its turns are judged.

    Attributes:
        name: the dataset's name in tables and in ``per-turn.tsv``.
        topics: the topics file, relative to the data folder.
        qrels: a qrels file relative to the data folder, or None for each turn's ``response_provenance``.
    """

    name: str
    topics: str
    qrels: str | None = None


DATASETS = (
    Dataset(
        "cast2022",
        "cast/2022-dev/2022_evaluation_topics_flattened_duplicated_v1.0.json",
        "cast/2022-dev/cast2022.provenance.qrel",
    ),
    Dataset("ikat2023-train", "ikat/2023_train_topics.json"),
    Dataset("ikat2023-test", "ikat/2023_test_topics_9-14.json"),
)
COLLECTION = (
    "wiki/enwiki-2013-core.jsonl.gz",
    "cast/2022-dev/provenance_passages.jsonl",
    "ikat/2023_train_topics_psg_text.jsonl",
    "ikat/2023_test_topics_9-14_psg_text.jsonl",
)


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


# --- answering ---------------------------------------------------------------------------------------------------


def answer_datasets(args: argparse.Namespace, datasets: Sequence[Dataset]) -> None:
    """Answer each dataset's turns into ``--out/<dataset>.run`` / ``.answers.jsonl``. A dataset whose files are
    complete is kept when its records were made with these settings, index and topics."""
    from cast.conversation.runner import LocalRunner
    from cast.core.config import load_config
    from cast.core.limits import bounded_turn
    from cast.core.pipeline import Pipeline
    from cast.errors import CastError
    from cast.formats.answers import read_answers
    from cast.formats.outputs import RunOutputs, resume_conflict, write_outputs
    from cast.formats.topics import topics_digest

    config = load_config(args.config, [f"index={args.index}", *args.overrides])
    runner = LocalRunner(Pipeline.from_config(config, progress=True))
    settings = runner.describe()  # the same for every dataset
    args.out.mkdir(parents=True, exist_ok=True)
    for dataset in datasets:
        conversations = load_dataset(args.data, dataset, args.max_turns)
        # As `cast run` records them: the outputs of other settings, another index or other topics are not kept.
        described = {**settings, "topics": topics_digest(conversations)}
        prefix = args.out / dataset.name
        outputs = RunOutputs(prefix, f"pooled-{dataset.name}", overwrite=True)
        if outputs.run_path.exists() and outputs.answers_path.exists():
            utterances = {t.qid: bounded_turn(t).utterance for c in conversations for t in c.turns}
            conflict = resume_conflict(read_answers(outputs.answers_path).records, utterances, described)
            if conflict is not None:
                raise CastError(
                    f"{outputs.answers_path} was made otherwise ({conflict}); choose another --out for this config"
                )
            print(f"{dataset.name}: kept (answered earlier in {args.out})", file=sys.stderr)
            continue
        prepared = prepared_turns(args.prepared, dataset, runner, conversations) if args.prepared else None
        print(f"{dataset.name}: answering {conversations_size(conversations)} turns", file=sys.stderr)
        with outputs.locked():
            write_outputs(
                outputs,
                described,
                conversations,
                lambda done, write, conversations=conversations, prepared=prepared: runner.run(
                    conversations, done=done, on_result=write, progress=True, prepared=prepared
                ),
                overwrite=False,
            )


def prepared_turns(folder: Path, dataset: Dataset, runner: Any, conversations: list) -> Any:
    """The dataset's turns prepared as far as re-ranking: read from ``folder`` (checked against ``runner``'s
    early stages), or prepared now and saved there."""
    from cast.conversation.prepared import Prepared

    path = folder / f"{dataset.name}.jsonl.gz"
    if path.is_file():
        prepared = Prepared.load(path)
        prepared.check(runner)
        return prepared
    prepared = runner.prepare(conversations, stop_after="rerank", progress=True)
    folder.mkdir(parents=True, exist_ok=True)
    # Later stages read the candidates' texts; below them the run file needs only ids and scores.
    prepared = prepared.compact(max(runner.candidates, 1))
    prepared.save(path)
    return prepared


def conversations_size(conversations: Sequence[Any]) -> int:
    return len({t.qid for c in conversations for t in c.turns})


def load_dataset(data: Path, dataset: Dataset, max_turns: int | None = None) -> list:
    """The dataset's conversations; with ``max_turns``, only its first that many distinct turns, in file order,
    each with every earlier turn of its conversation (a conversation that adds no turn of them is left out)."""
    from dataclasses import replace

    from cast.formats.topics import load_topics

    conversations = load_topics(data / dataset.topics)
    if max_turns is None:
        return conversations
    kept, seen = [], set()
    for conversation in conversations:
        turns = list(conversation.turns)
        new = [i for i, t in enumerate(turns) if t.qid not in seen][: max_turns - len(seen)]
        if new:
            seen.update(turns[i].qid for i in new)
            kept.append(replace(conversation, turns=tuple(turns[: new[-1] + 1])))
    return kept


def dataset_qrels(data: Path, dataset: Dataset, conversations: Sequence[Any]) -> dict[str, dict[str, int]]:
    """The dataset's qrels: its file, or each turn's ``response_provenance`` as relevant (grade 1)."""
    from cast.formats.topics import provenance_qrels, read_qrels

    if dataset.qrels is not None:
        return read_qrels(data / dataset.qrels)
    return provenance_qrels(conversations)


def topic_of(dataset: Dataset, conversation: Any) -> str:
    """The topic a conversation belongs to, for leave-one-topic-out: CAsT 2022's paths of one topic share turns,
    and iKAT's conversations ``9-1`` and ``9-2`` share a topic."""
    return f"{dataset.name.split('-')[0]}:{conversation.topic_id.split('-')[0]}"


# --- scoring -----------------------------------------------------------------------------------------------------


def score_datasets(args: argparse.Namespace, datasets: Sequence[Dataset]) -> pd.DataFrame:
    """One row per turn (``dataset``, ``topic``, ``qid``, then :data:`MEASURES` and :data:`FORM`; empty where not
    measured)."""
    import pandas as pd
    from tqdm import tqdm

    from cast.evaluate.answers import TextScorer, evaluate_answers, passages_from_index, response_references
    from cast.evaluate.retrieval import evaluate_run
    from cast.formats.answers import read_answers
    from cast.formats.runfile import read_run

    scorer = TextScorer()
    frames = []
    for dataset in datasets:
        conversations = load_dataset(args.data, dataset, args.max_turns)
        topics = {t.qid: topic_of(dataset, c) for c in conversations for t in c.turns}
        prefix = args.out / dataset.name
        retrieval = evaluate_run(
            read_run(f"{prefix}.run"), dataset_qrels(args.data, dataset, conversations), names=RETRIEVAL
        ).per_turn
        answers = read_answers(f"{prefix}.answers.jsonl")
        sources = {pid for answer in answers.answers.values() for pid in answer.source_ids}
        passages = passages_from_index(args.index, sources)
        scored = evaluate_answers(
            answers,
            response_references(conversations),
            scorer=scorer,
            references_name="written responses",
            passage_texts=passages,
            progress=lambda turns, name=dataset.name: tqdm(list(turns), desc=f"scoring {name}", unit="turn"),
        ).per_turn[list(ANSWERS)]
        form = form_per_turn(conversations, answers.answers, passages).reindex(scored.index)
        # Only the benchmark's turns: the qrels judge turns that --max-turns leaves out.
        frame = retrieval.join(scored.join(form), how="outer")
        frame = frame[frame.index.isin(list(topics))]
        frame.insert(0, "topic", [topics[qid] for qid in frame.index])
        frame.insert(0, "dataset", dataset.name)
        frames.append(frame.reset_index())
    return pd.concat(frames, ignore_index=True)[["dataset", "topic", "qid", *MEASURES, *FORM]]


def form_per_turn(
    conversations: Sequence[Any], answers: dict[str, Any], passages: dict[str, str]
) -> pd.DataFrame:
    """Each answered turn's length and form checks (100: at fault), each answer checked against the earlier
    answers of its conversation."""
    import pandas as pd

    from cast.evaluate.form import form_checks
    from cast.infra.text import count_words
    from cast.infra.wellformed import FormReader

    reader = FormReader()
    table = {}
    for conversation in conversations:
        earlier = []
        for turn in conversation.turns:
            answer = answers.get(turn.qid)
            if answer is None:
                continue
            checks = form_checks(answer, earlier, passages, reader)
            table[turn.qid] = {"words": count_words(answer.text), **{k: 100 * v for k, v in checks.items()}}
            earlier.append(answer)
    return pd.DataFrame.from_dict(table, orient="index", columns=list(FORM))


def read_per_turn(path: Path) -> pd.DataFrame:
    import pandas as pd

    from cast.errors import DataFormatError

    try:
        frame = pd.read_csv(path, sep="\t", dtype={"dataset": str, "topic": str, "qid": str})
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise DataFormatError(path, f"not a per-turn table ({e})") from None
    missing = [c for c in ("dataset", "topic", "qid", *MEASURES) if c not in frame.columns]
    if missing:
        raise DataFormatError(path, f"not a per-turn table of this benchmark (no column {missing[0]!r})")
    for column in FORM:  # files written before the form checks
        if column not in frame.columns:
            frame[column] = float("nan")
    return frame


def write_per_turn(path: Path, frame: pd.DataFrame) -> None:
    from cast.infra.atomic import write_text_atomic

    write_text_atomic(path, frame.to_csv(sep="\t", index=False, float_format=RECORDED_FORMAT))


def as_recorded(values: np.ndarray) -> np.ndarray:
    """``values`` at the precision a per-turn file records them: a run compared with a baseline file differs
    from it by what it changed, not by the file's rounding (a constant difference of 1e-8 is significant)."""
    import numpy as np

    return np.array([float(RECORDED_FORMAT % value) for value in values])


# --- comparing ---------------------------------------------------------------------------------------------------


def rows(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The per-turn rows of each dataset and of all pooled, keyed by ``(dataset, qid)``."""
    indexed = frame.set_index(["dataset", "qid"])
    groups = {name: group for name, group in indexed.groupby(level="dataset", sort=False)}
    return {**groups, POOLED: indexed}


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Means per dataset and pooled, with the number of judged and answered turns."""
    import pandas as pd

    table = {}
    for name, group in rows(frame).items():
        means = group.reindex(columns=[*MEASURES, *FORM]).mean()  # FORM: absent from older files
        means["judged"] = group["MRR"].notna().sum()
        means["answered"] = group["ROUGE-L"].notna().sum()
        table[name] = means
    return pd.DataFrame(table).T


@dataclass(frozen=True)
class Test:
    """One measure of one row tested against the baseline."""

    n: int
    difference: float
    t_test_p: float
    randomisation_p: float

    @property
    def significant(self) -> bool:
        from cast.evaluate.significance import SIGNIFICANCE_LEVEL

        return self.t_test_p < SIGNIFICANCE_LEVEL and self.randomisation_p < SIGNIFICANCE_LEVEL


def tests_against(system: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, dict[str, Test]]:
    """Paired tests of every measure of every row (datasets and pooled) over the turns both files scored, with
    both p-values Holm-corrected over the measures of the row."""
    from cast.evaluate.significance import holm_bonferroni, paired_test

    results: dict[str, dict[str, Test]] = {}
    base_rows = rows(baseline)
    for name, group in rows(system).items():
        if name not in base_rows:
            continue
        base = base_rows[name]
        raw = {}
        for measure in MEASURES:
            both = group[measure].notna() & group.index.isin(base.index)
            shared = group.index[both]
            shared = shared[base.loc[shared, measure].notna().to_numpy()]
            if len(shared) == 0:
                continue
            raw[measure] = paired_test(
                as_recorded(group.loc[shared, measure].to_numpy()),
                as_recorded(base.loc[shared, measure].to_numpy()),
            )
        t_ps = holm_bonferroni([t.t_test_p for t in raw.values()])
        r_ps = holm_bonferroni([t.randomisation_p for t in raw.values()])
        results[name] = {
            measure: Test(test.n, test.mean_difference, t_p, r_p)
            for (measure, test), t_p, r_p in zip(raw.items(), t_ps, r_ps, strict=True)
        }
    return results


def leave_one_topic_out(
    systems: dict[str, pd.DataFrame], baseline: str
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Each topic answered by the system with the best score on the other topics: the mean over
    :data:`HEADLINE` of each measure's ratio to the baseline's mean there (so that MRR and ROUGE weigh alike).

    Returns:
        the pooled held-out per-turn table (the same rows as the baseline's), and the system chosen per topic.
    """
    import pandas as pd

    keyed = {name: frame.set_index(["dataset", "qid"]) for name, frame in systems.items()}
    base = keyed[baseline]
    held_out = []
    chosen: dict[str, str] = {}
    for topic in sorted(base["topic"].unique()):
        elsewhere = base["topic"] != topic
        reference = base[elsewhere]
        scores = {
            name: sum(
                frame.reindex(reference.index)[m].mean() / reference[m].mean()
                for m in HEADLINE
                if reference[m].mean() > 0
            )
            for name, frame in keyed.items()
        }
        chosen[topic] = max(systems, key=scores.__getitem__)  # ties: the first given, the baseline
        held_out.append(keyed[chosen[topic]].reindex(base.index[~elsewhere]))
    pooled = pd.concat(held_out).reindex(base.index)
    pooled["topic"] = base["topic"]
    return pooled.reset_index().reindex(columns=["dataset", "topic", "qid", *MEASURES, *FORM]), chosen


def print_summary(title: str, frame: pd.DataFrame, tests: dict[str, dict[str, Test]] | None) -> list[str]:
    """Print the means (``†`` where a row differs significantly from the baseline); returns the headline
    measures that got significantly worse pooled."""
    from cast.evaluate.significance import SIGNIFICANT_MARK

    table = summary(frame)
    print(f"\n{title}")
    print("| row | judged | answered | " + " | ".join(MEASURES) + " |")
    print("| --- " * (3 + len(MEASURES)) + "|")
    for name, means in table.iterrows():
        cells = []
        for measure in MEASURES:
            # retrieval measures in [0, 1], answer measures in percent
            cell = f"{means[measure]:.3f}" if measure in RETRIEVAL else f"{means[measure]:.2f}"
            test = (tests or {}).get(str(name), {}).get(measure)
            if test is not None and test.significant:
                cell += SIGNIFICANT_MARK
            cells.append(cell)
        print(f"| {name} | {means['judged']:.0f} | {means['answered']:.0f} | " + " | ".join(cells) + " |")
    print("\nForm checks (% of answered turns at fault; words: mean length)")
    print("| row | " + " | ".join(FORM) + " |")
    print("| --- " * (1 + len(FORM)) + "|")
    for name, means in table.iterrows():
        print(f"| {name} | " + " | ".join(f"{means[c]:.1f}" for c in FORM) + " |")
    if tests is None:
        return []
    worse = {
        name: [m for m, t in by_measure.items() if t.significant and t.difference < 0]
        for name, by_measure in tests.items()
    }
    better = {
        name: [m for m, t in by_measure.items() if t.significant and t.difference > 0]
        for name, by_measure in tests.items()
    }
    print(
        f"{SIGNIFICANT_MARK}: differs from the baseline at p < 0.05 in both a paired t-test and a randomisation test, "
        "Holm-corrected over the measures of the row"
    )
    for name in tests:
        differences = ", ".join(f"{m} {t.difference:+.4g}" for m, t in tests[name].items() if m in HEADLINE)
        print(f"  {name}: {differences}")
        if worse[name]:
            print(f"  {name}: significantly WORSE on {', '.join(worse[name])}")
        if better[name]:
            print(f"  {name}: significantly better on {', '.join(better[name])}")
    return [m for m in worse.get(POOLED, []) if m in HEADLINE]


# --- commands ----------------------------------------------------------------------------------------------------


def run_benchmark(args: argparse.Namespace) -> int:
    from cast.errors import CastError

    datasets = [d for d in DATASETS if not args.datasets or d.name in args.datasets]
    baseline_path = args.baseline or BASELINES / f"{Path(args.config).stem}.tsv"
    if args.baseline is not None and not args.baseline.is_file():
        raise CastError(f"no baseline file {args.baseline}")
    started = time.perf_counter()
    answer_datasets(args, datasets)
    answered = time.perf_counter() - started
    frame = score_datasets(args, datasets)
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
    from cast.errors import CastError

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
