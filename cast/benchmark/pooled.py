"""The pooled development benchmark as a library: answer a dataset's conversations with a pipeline into resumable
run and answers files, score them turn by turn (retrieval, answers and a reader's form checks), and test each
measure against a baseline's per-turn scores with significance. ``bench/pooled.py`` is its command line.

A per-turn table has one row per turn: ``dataset``, ``topic`` and ``qid``, then :data:`MEASURES` and
:data:`FORM` (empty where not measured: retrieval measures on judged turns, answer measures on turns with a
written response). Its rows are each dataset's and all of them pooled.

Example:
    >>> from cast.benchmark.pooled import read_per_turn, summary, tests_against
    >>> baseline = read_per_turn("bench/baselines/offline.tsv")  # doctest: +SKIP
    >>> candidate = read_per_turn("runs/pooled/candidate/per-turn.tsv")  # doctest: +SKIP
    >>> tests_against(candidate, baseline)["pooled"]["MRR"].significant  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.benchmark.datasets import Dataset, dataset_qrels, load_dataset, topic_of
from cast.conversation.prepared import Prepared
from cast.conversation.runner import Runner
from cast.core.limits import bounded_turn
from cast.core.records import Answer, Conversation
from cast.errors import CastError, DataFormatError
from cast.evaluate.answers import TextScorer, evaluate_answers, passages_from_index, response_references
from cast.evaluate.form import form_checks
from cast.evaluate.retrieval import evaluate_run
from cast.evaluate.significance import (
    SIGNIFICANCE_LEVEL,
    SIGNIFICANT_MARK,
    holm_bonferroni,
    paired_test,
)
from cast.formats.answers import read_answers
from cast.formats.outputs import RunOutputs, resume_conflict, write_outputs
from cast.formats.runfile import read_run
from cast.formats.topics import topics_digest
from cast.infra.atomic import write_text_atomic
from cast.infra.text import count_words
from cast.infra.wellformed import FormReader

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
POOLED = "pooled"
# How per-turn files record each score (six significant digits).
RECORDED_FORMAT = "%.6g"


# --- answering ---------------------------------------------------------------------------------------------------


def answer_topics(
    runner: Runner,
    conversations: list[Conversation],
    prefix: Path,
    run_name: str,
    *,
    prepared: Path | None = None,
) -> bool:
    """Answer ``conversations`` into ``PREFIX.run`` and ``PREFIX.answers.jsonl`` (as ``cast run`` writes them;
    an interrupted call resumes). Files already complete are kept when their records were made with the runner's
    settings, index and topics.

    Args:
        runner: the pipeline's runner (:class:`~cast.conversation.runner.LocalRunner`).
        prefix: the outputs' path without their suffixes; its folder is made.
        run_name: the run file's tag.
        prepared: a file of the turns prepared as far as re-ranking (see :func:`prepared_turns`).

    Returns:
        whether the turns were answered now (False: kept).

    Raises:
        CastError: the files were made with other settings, another index or other topics.
    """
    # As `cast run` records them: the outputs of other settings, another index or other topics are not kept.
    described = {**runner.describe(), "topics": topics_digest(conversations)}
    prefix.parent.mkdir(parents=True, exist_ok=True)
    outputs = RunOutputs(prefix, run_name, overwrite=True)
    if outputs.run_path.exists() and outputs.answers_path.exists():
        utterances = {t.qid: bounded_turn(t).utterance for c in conversations for t in c.turns}
        conflict = resume_conflict(read_answers(outputs.answers_path).records, utterances, described)
        if conflict is not None:
            raise CastError(
                f"{outputs.answers_path} was made otherwise ({conflict}); choose another --out for this config"
            )
        return False
    turns = prepared_turns(prepared, runner, conversations) if prepared is not None else None
    print(
        f"{prefix.name}: answering {len({t.qid for c in conversations for t in c.turns})} turns",
        file=sys.stderr,
    )
    with outputs.locked():
        write_outputs(
            outputs,
            described,
            conversations,
            lambda done, write: runner.run(
                conversations, done=done, on_result=write, progress=True, prepared=turns
            ),
            overwrite=False,
        )
    return True


def answer_datasets(
    runner: Runner,
    data: Path,
    out: Path,
    datasets: Sequence[Dataset],
    *,
    max_turns: int | None = None,
    prepared: Path | None = None,
) -> None:
    """Answer each dataset's conversations (read from the data folder ``data``; with ``max_turns``, see
    :func:`~cast.benchmark.datasets.load_dataset`) into ``out/<dataset>.run`` and ``.answers.jsonl``
    (:func:`answer_topics`), with the turns prepared as far as re-ranking in ``prepared/<dataset>.jsonl.gz``
    where a folder is given."""
    for dataset in datasets:
        conversations = load_dataset(data, dataset, max_turns)
        answered = answer_topics(
            runner,
            conversations,
            out / dataset.name,
            f"pooled-{dataset.name}",
            prepared=prepared / f"{dataset.name}.jsonl.gz" if prepared is not None else None,
        )
        if not answered:
            print(f"{dataset.name}: kept (answered earlier in {out})", file=sys.stderr)


def prepared_turns(path: Path, runner: Runner, conversations: Sequence[Conversation]) -> Prepared:
    """The turns prepared as far as re-ranking: read from ``path`` (checked against ``runner``'s early stages),
    or prepared now and saved there, so that variants of the later stages (linker, selector, summarizer) rerun no
    retrieval or re-ranking."""
    if path.is_file():
        prepared = Prepared.load(path)
        prepared.check(runner)
        return prepared
    prepared = runner.prepare(conversations, stop_after="rerank", progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Later stages read the candidates' texts; below them the run file needs only ids and scores.
    prepared = prepared.compact(max(runner.candidates, 1))
    prepared.save(path)
    return prepared


# --- scoring -----------------------------------------------------------------------------------------------------


def score_topics(
    dataset: str,
    conversations: Sequence[Conversation],
    prefix: Path,
    qrels: dict[str, dict[str, int]],
    index: str | Path,
    *,
    topics: dict[str, str],
    scorer: TextScorer | None = None,
    progress: Callable[[Iterable[Any]], Iterable[Any]] = iter,
) -> pd.DataFrame:
    """The per-turn table of ``PREFIX.run`` and ``PREFIX.answers.jsonl`` (:func:`answer_topics`' files), its rows
    named ``dataset``: retrieval against ``qrels``, answers against the conversations' written responses (the
    passages they cite read from ``index``) and their form checks, one row per turn of ``topics`` (``{qid:
    topic}``). Conversations without written responses are scored on retrieval alone."""
    import pandas as pd

    retrieval = evaluate_run(read_run(f"{prefix}.run"), qrels, names=RETRIEVAL).per_turn
    references = response_references(conversations)
    if references:
        answers = read_answers(f"{prefix}.answers.jsonl")
        sources = {pid for answer in answers.answers.values() for pid in answer.source_ids}
        passages = passages_from_index(index, sources)
        scored = evaluate_answers(
            answers,
            references,
            scorer=scorer or TextScorer(),
            references_name="written responses",
            passage_texts=passages,
            progress=progress,
        ).per_turn[list(ANSWERS)]
        scored = scored.join(form_per_turn(conversations, answers.answers, passages).reindex(scored.index))
    else:  # topics without written responses: retrieval alone
        scored = pd.DataFrame(
            columns=[*ANSWERS, *FORM], index=pd.Index([], dtype=str, name="qid"), dtype=float
        )
    # Only these turns: the qrels judge turns that a cut (--max-turns) leaves out.
    frame = retrieval.join(scored, how="outer")
    frame = frame[frame.index.isin(list(topics))]
    frame.insert(0, "topic", [topics[qid] for qid in frame.index])
    frame.insert(0, "dataset", dataset)
    return frame.reset_index()[["dataset", "topic", "qid", *MEASURES, *FORM]]


def score_datasets(
    data: Path, out: Path, index: str | Path, datasets: Sequence[Dataset], *, max_turns: int | None = None
) -> pd.DataFrame:
    """The per-turn table of the datasets answered into ``out`` (:func:`answer_datasets`; the same ``data`` and
    ``max_turns``), their passages read from ``index``."""
    import pandas as pd

    scorer = TextScorer()
    frames = []
    for dataset in datasets:
        conversations = load_dataset(data, dataset, max_turns)
        frames.append(
            score_topics(
                dataset.name,
                conversations,
                out / dataset.name,
                dataset_qrels(data, dataset, conversations),
                index,
                topics={t.qid: topic_of(dataset, c) for c in conversations for t in c.turns},
                scorer=scorer,
                progress=partial(progress_bar, desc=f"scoring {dataset.name}"),
            )
        )
    return pd.concat(frames, ignore_index=True)


def progress_bar(turns: Iterable[Any], desc: str) -> Iterable[Any]:
    """``turns`` with a progress bar described by ``desc``."""
    from tqdm import tqdm

    return tqdm(list(turns), desc=desc, unit="turn")


def form_per_turn(
    conversations: Sequence[Conversation], answers: dict[str, Answer], passages: dict[str, str]
) -> pd.DataFrame:
    """Each answered turn's length and form checks (100: at fault), each answer checked against the earlier
    answers of its conversation."""
    import pandas as pd

    reader = FormReader()
    table = {}
    for conversation in conversations:
        earlier: list[Answer] = []
        for turn in conversation.turns:
            answer = answers.get(turn.qid)
            if answer is None:
                continue
            checks = form_checks(answer, earlier, passages, reader)
            table[turn.qid] = {"words": count_words(answer.text), **{k: 100 * v for k, v in checks.items()}}
            earlier.append(answer)
    return pd.DataFrame.from_dict(table, orient="index", columns=list(FORM))


def read_per_turn(path: str | Path) -> pd.DataFrame:
    """A per-turn table written by :func:`write_per_turn` (the form columns empty in files written before them).

    Raises:
        DataFormatError: the file is not a per-turn table of this benchmark.
    """
    import pandas as pd

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
    """``frame`` as a tab-separated file, each score to :data:`RECORDED_FORMAT`."""
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
class MeasureTest:
    """One measure of one row tested against the baseline: the turns both scored, the mean difference and the
    two p-values, Holm-corrected over the measures of the row."""

    n: int
    difference: float
    t_test_p: float
    randomisation_p: float

    @property
    def significant(self) -> bool:
        """Both tests below :data:`~cast.evaluate.significance.SIGNIFICANCE_LEVEL`."""
        return self.t_test_p < SIGNIFICANCE_LEVEL and self.randomisation_p < SIGNIFICANCE_LEVEL


def tests_against(system: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, dict[str, MeasureTest]]:
    """Paired tests (t-test and randomisation test) of every measure of every row (datasets and pooled) over the
    turns both tables scored, with both p-values Holm-corrected over the measures of the row; by row, then
    measure."""
    results: dict[str, dict[str, MeasureTest]] = {}
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
            measure: MeasureTest(test.n, test.mean_difference, t_p, r_p)
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


def print_summary(
    title: str, frame: pd.DataFrame, tests: dict[str, dict[str, MeasureTest]] | None
) -> list[str]:
    """Print the means and form checks as Markdown tables (``†`` where a row differs significantly from the
    baseline, with ``tests`` from :func:`tests_against`); returns the headline measures that got significantly
    worse pooled."""
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
