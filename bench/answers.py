"""Passage selection benchmark: the paper's Table 1 on the CAsT 2022 dev benchmark.

For each selection method (O, ER, EG at several gamma, EG+EP, ...) the extractive answer built from the chosen
passages (``--summarizer``, ``topk_trim`` by default) is scored against each turn's written response: words,
ROUGE-1/2/L, BLEU-1/4, METEOR (``cast.evaluate.answers``), the share of chosen passages judged relevant, and the
selection time per turn with warm caches. Methods marked † differ from O significantly (paired t-test and
randomisation test, p < 0.05) on that measure.

The pipeline's early stages (rewrite, retrieval, re-ranking, entity linking of the candidates) run once
(:func:`cast.conversation.walker.prepare_conversations`); each method finishes the prepared turns (selection and
summarisation) through the pipeline's own conversation walk, so that history entities and the focus entity (for
EP) are those each method would have seen.

``--min-specificity S...`` re-runs every method once per value on the stored links filtered as the dictionary
linker's ``min_specificity`` would (rows ``method@sS``). ``--loto`` adds a leave-one-topic-out row: for each
topic, the row (O excepted) with the best mean of ROUGE-L and METEOR on the other topics answers its turns;
the held-out turns are pooled, so the tuning's optimism does not reach the figure.

Usage:
    .venv/bin/python bench/answers.py                      # all methods, manual rewrites
    .venv/bin/python bench/answers.py --methods o eg.25 --prepared /tmp/prepared.jsonl.gz
    .venv/bin/python bench/answers.py --summarizer entity_extractive --answers-dir runs/
    .venv/bin/python bench/answers.py --methods o eg.25-interp.5 eg.25-interp.75 --min-specificity 0 0.05 --loto
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

# numpy's OpenBLAS worker threads crash the process (SIGSEGV) once the JVM runs; the selection matrices are
# small, one BLAS thread is enough. Set before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cast.benchmark.scripts import DEFAULT_INDEX, DEV_2022_QRELS, DEV_2022_TOPICS, run

MEASURES = ("words", "ROUGE-1", "ROUGE-2", "ROUGE-L", "BLEU-1", "BLEU-4", "METEOR")
LOTO_MEASURES = ("ROUGE-L", "METEOR")  # --loto chooses by their mean
AUC_SCORES = ("entity_score", "relevance")  # --auc: candidate scores in a selection's explanation

# label -> selector config section; the pipeline's own selector section supplies candidates and n. The paper's
# rows (no suffix) re-order the candidates by entity score (`combine: reorder`); `-interp` rows use the
# selectors' default, half relevance and half entity score.
PAPER = {"combine": "reorder"}
INTERPOLATE = {"combine": "interpolate", "weight": 0.5}
METHODS: dict[str, dict[str, Any]] = {
    "o": {"name": "o"},
    "er": {"name": "er", **PAPER},
    **{
        f"eg{g:g}".replace("0.", "."): {"name": "eg", "gamma": g, **PAPER}
        for g in (0.0, 0.25, 0.5, 0.75, 1.0)
    },
    "eg.25+ep": {"name": "eg", "gamma": 0.25, "path_bonus": 0.1, **PAPER},
    "o+ep": {"name": "o", "path_bonus": 0.1, **PAPER},
    "eg.25+ed": {"name": "eg", "gamma": 0.25, "density_filter": True, **PAPER},
    "eg.25-mean": {"name": "eg", "gamma": 0.25, "aggregate": "mean", **PAPER},
    # tau 1.1 keeps only entity pairs that co-occur in at least two candidates (one gives (1-gamma)^2 = .5625)
    "eg.25-tau1.1": {"name": "eg", "gamma": 0.25, "threshold": 1.1, **PAPER},
    "eg.25-relorder": {"name": "eg", "gamma": 0.25, "passage_order": "relevance", **PAPER},
    "eg.25-nohistory": {"name": "eg", "gamma": 0.25, "history": False, **PAPER},
    "eg.25-alpha.85": {"name": "eg", "gamma": 0.25, "alpha": 0.85, **PAPER},
    "er-relorder": {"name": "er", "passage_order": "relevance", **PAPER},
    "er-interp": {"name": "er", **INTERPOLATE},
    "eg.25-interp": {"name": "eg", "gamma": 0.25, **INTERPOLATE},
    "eg1-interp": {"name": "eg", "gamma": 1.0, **INTERPOLATE},
    "eg.25+ep-interp": {"name": "eg", "gamma": 0.25, "path_bonus": 0.1, **INTERPOLATE},
    # the relevance weight of `interpolate`, searched with --loto
    **{
        f"eg.25-interp{w:g}".replace("0.", "."): {
            "name": "eg",
            "gamma": 0.25,
            "combine": "interpolate",
            "weight": w,
        }
        for w in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
    },
    "er-interp.75": {"name": "er", "combine": "interpolate", "weight": 0.75},
}
DEFAULT_METHODS = ["o", "er", "eg0", "eg.25", "eg.5", "eg.75", "eg1", "eg.25+ep", "er-interp", "eg.25-interp"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from cast.evaluate.significance import CORRECTIONS

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="usage examples:" + __doc__.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--topics",
        type=Path,
        default=DEV_2022_TOPICS,
        help="CAsT 2022 topics with written responses (default: %(default)s)",
    )
    parser.add_argument(
        "--qrels",
        type=Path,
        default=DEV_2022_QRELS,
        help="qrels judging the chosen passages (default: %(default)s)",
    )
    parser.add_argument(
        "--index",
        type=Path,
        default=Path(DEFAULT_INDEX),
        help="Krovetz index of the topics' collection (default: %(default)s)",
    )
    parser.add_argument("--config", default="offline", help="pipeline config profile (default: offline)")
    parser.add_argument(
        "--rewriter", default="manual", help="rewriter (default: manual, to isolate selection)"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=sorted(METHODS))
    parser.add_argument(
        "--summarizer", default="topk_trim", help="summarizer of the answers (default topk_trim)"
    )
    parser.add_argument("--words", type=int, default=50, help="the summarizer's word budget (default 50)")
    parser.add_argument(
        "--min-grade", type=int, default=1, help="qrels grade from which a passage is relevant"
    )
    parser.add_argument("--limit", type=int, help="only the first N conversations (for a quick check)")
    parser.add_argument(
        "--prepared",
        type=Path,
        help="the turns prepared as far as entity linking (cast/conversation/prepared.py): read if present, else written",
    )
    parser.add_argument(
        "--answers-dir", type=Path, help="write <method>.answers.jsonl here (for `cast explain`)"
    )
    parser.add_argument(
        "--min-specificity",
        type=float,
        nargs="+",
        metavar="S",
        help="re-run the methods on the stored links filtered at each linker min_specificity S (dictionary linker)",
    )
    parser.add_argument(
        "--relink",
        nargs="+",
        metavar="KEY=VALUE",
        help="link the stored queries and candidates again with this linker section (e.g. name=wikipedia), "
        "keeping rewriting, retrieval and re-ranking as prepared",
    )
    parser.add_argument(
        "--auc",
        action="store_true",
        help="print per row how often a judged-relevant candidate outscores a non-relevant one (entity score "
        "and re-ranker relevance), over turns with both among the candidates",
    )
    parser.add_argument(
        "--loto",
        action="store_true",
        help="add the leave-one-topic-out cross-validated choice among the rows",
    )
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        help="Holm-Bonferroni-correct the p-values of the rows tested against O, per measure",
    )
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace, conversations: list, pipeline: Any) -> Any:
    """Every turn taken as far as entity linking (run once, or read back from ``--prepared``)."""
    from cast.conversation.prepared import Prepared
    from cast.conversation.walker import prepare_conversations

    if args.prepared and args.prepared.is_file():
        prepared = Prepared.load(args.prepared)
        prepared.check(pipeline)
        return prepared
    start = time.perf_counter()
    prepared = prepare_conversations(pipeline, conversations, stop_after="link", progress=True)
    print(f"pipeline: {len(prepared.turns)} turns in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.prepared:
        prepared = prepared.compact(pipeline.candidates)
        prepared.save(args.prepared)
    return prepared


def with_links(prepared: Any, linker: Any, links: Callable[[Any], Any]) -> Any:
    """``prepared`` with each turn's links replaced by ``links(turn)``, as made by ``linker``."""
    return replace(
        prepared,
        description={**prepared.description, "linker": linker.describe()},
        turns={qid: replace(turn, links=links(turn)) for qid, turn in prepared.turns.items()},
    )


def filter_links(prepared: Any, linker: Any, min_specificity: float) -> Any:
    """The prepared turns with the links below ``min_specificity`` dropped, as that linker setting would."""

    def kept(mentions: tuple) -> tuple:
        return tuple(m for m in mentions if linker.specific_enough(m.surface, m.entity, min_specificity))

    def filtered(turn: Any) -> Any:
        return replace(
            turn.links,
            query_entities=kept(turn.links.query_entities),
            passage_entities={pid: kept(ms) for pid, ms in turn.links.passage_entities.items()},
        )

    return with_links(prepared, linker, filtered)


def relink(prepared: Any, pipeline: Any, conversations: list) -> Any:
    """The prepared turns with their queries and candidates linked again by ``pipeline``'s linker, as the
    pipeline links them (each turn after its conversation's earlier prepared queries)."""
    turns = prepared.turns
    histories = {}
    for conversation in conversations:
        earlier = [turns[t.qid].past_turn() for t in conversation.turns if t.qid in turns]
        for number, past in enumerate(earlier):
            histories.setdefault(past.turn.qid, earlier[:number])
    qids = list(turns)
    links = pipeline.link_batch(
        [turns[q].rewrite.query for q in qids], [turns[q].ranking for q in qids], [histories[q] for q in qids]
    )
    found = dict(zip(qids, links, strict=True))
    return with_links(prepared, pipeline.linker, lambda turn: found[turn.qid])


class TimedSelector:
    """A selector whose every ``select`` call's seconds are kept (per turn, for the table's mean and p95)."""

    def __init__(self, selector: Any):
        self.selector = selector
        self.seconds: list[float] = []

    def select(self, inputs: Any) -> Any:
        start = time.perf_counter()
        selection = self.selector.select(inputs)
        self.seconds.append(time.perf_counter() - start)
        return selection

    def __getattr__(self, name: str) -> Any:
        return getattr(self.selector, name)


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from cast.conversation.walker import answer_conversations
    from cast.core.config import load_config
    from cast.core.pipeline import Pipeline
    from cast.core.registry import build_stage
    from cast.evaluate.answers import TextScorer, evaluate_answers
    from cast.formats.answers import AnswersFile
    from cast.formats.topics import load_topics, read_qrels
    from cast.infra.resources import Resources

    args = parse_args(argv)
    conversations = load_topics(args.topics)[: args.limit]
    qrels = read_qrels(args.qrels)
    config = load_config(
        args.config,
        [f"index={args.index}", f"rewriter.name={args.rewriter}", "selector.name=eg", *args.overrides],
    )
    resources = Resources(config)
    pipeline = Pipeline.from_config(config, resources)
    prepared = prepare(args, conversations, pipeline)
    if args.relink:
        from cast.core.config import parse_override

        section = {keys[-1]: value for keys, value in map(parse_override, args.relink)}
        linker = build_stage("linker", section, resources)
        start = time.perf_counter()
        pipeline = pipeline.with_stages(config, linker=linker)
        prepared = relink(prepared, pipeline, conversations)
        print(f"re-linked with {linker.describe()} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    base_selector = {k: v for k, v in config["selector"].items() if k in ("candidates", "n")}
    # The config's settings of that summarizer (e.g. the offline profile's relevance: dense), --words on top.
    section = config["summarizer"] if config["summarizer"].get("name") == args.summarizer else {}
    summarizer = build_stage(
        "summarizer", {**section, "name": args.summarizer, "words": args.words}, resources
    )
    scorer = TextScorer()
    references = {t.qid: t.response for c in conversations for t in c.turns if t.response}
    qids = [qid for qid in prepared.turns if qid in references]

    runs: list[tuple[str, str, Any, Any]] = [
        (label, label, prepared, pipeline.linker) for label in args.methods
    ]
    if args.min_specificity:
        linker = pipeline.linker
        if not hasattr(linker, "specific_enough"):
            sys.exit(f"--min-specificity needs the dictionary linker, not {linker.name}")
        filtered = {}
        for s in args.min_specificity:
            at_s = build_stage("linker", {**config["linker"], "min_specificity": s}, resources)
            filtered[s] = (filter_links(prepared, linker, s), at_s)
        runs = [(label, label, prepared, linker) for label in args.methods if label == "o"] + [
            (f"{label}@s{s:g}", label, *filtered[s])
            for s in args.min_specificity
            for label in args.methods
            if label != "o"  # O reads no entities: one row
        ]
    rows: dict[str, dict[str, float]] = {}
    per_turn: dict[str, dict[str, np.ndarray]] = {}
    for row_label, label, run_prepared, linker in runs:
        selector = TimedSelector(build_stage("selector", {**base_selector, **METHODS[label]}, resources))
        method = pipeline.with_stages(
            config, linker=linker, selector=cast(Any, selector), summarizer=summarizer
        )
        answer_conversations(method, conversations, prepared=run_prepared)  # warms the knowledge base's memo
        selector.seconds = []
        results = {r.qid: r for r in answer_conversations(method, conversations, prepared=run_prepared)}
        selections = {q: r.selection for q, r in results.items()}
        answers = {q: results[q].answer for q in qids}
        # Scored as `cast eval answers` scores an answers file (a turn without an answer scores 0).
        scored = evaluate_answers(
            AnswersFile(path=Path(row_label), name=row_label, answers=answers, records={}),
            {q: [references[q]] for q in qids},
            scorer=scorer,
            references_name="the written responses",
        )
        per_turn[row_label] = {m: scored.per_turn.loc[qids, m].to_numpy() for m in MEASURES}
        per_turn[row_label]["relevant"] = np.array(
            [
                np.mean([qrels[q].get(p.id, 0) >= args.min_grade for p in selections[q].passages])
                if qrels.get(q)
                else np.nan
                for q in qids
            ]
        )
        rows[row_label] = table_row(per_turn[row_label], selector.seconds)
        if args.auc:
            aucs = {key: candidate_auc(selections, qrels, key, args.min_grade) for key in AUC_SCORES}
            print(f"{row_label}: AUC " + ", ".join(f"{k} {v:.3f}" for k, v in aucs.items()), file=sys.stderr)
        if args.answers_dir:
            write_answers(args.answers_dir / f"{row_label}.answers.jsonl", results, qids)
        print(f"{row_label}: done", file=sys.stderr)
    if args.loto:
        choices = leave_one_topic_out(per_turn, [prepared.turns[q].turn.topic_id for q in qids])
        per_turn["loto-cv"] = choices.pop("per_turn")
        rows["loto-cv"] = table_row(per_turn["loto-cv"], seconds=None)
        print("loto-cv choices (held-out topic: row): " + ", ".join(f"{t}: {r}" for t, r in choices.items()))
    print_table(rows, per_turn, qids, args)
    return 0


def table_row(values: dict[str, Any], seconds: list[float] | None) -> dict[str, float]:
    """A table row from a row's per-turn values: measure means, the share of chosen passages judged relevant
    (over judged turns), and the selection time per turn (none for a row made of other rows' turns)."""
    import numpy as np

    return {
        **{m: float(values[m].mean()) for m in MEASURES},
        "relevant": 100 * float(np.nanmean(values["relevant"])),
        "ms": 1000 * float(np.mean(seconds)) if seconds else float("nan"),
        "ms_p95": 1000 * float(np.percentile(seconds, 95)) if seconds else float("nan"),
    }


def candidate_auc(selections: dict[str, Any], qrels: dict, key: str, min_grade: int) -> float:
    """The mean over turns of the chance that a relevant candidate's ``key`` score beats a non-relevant one's
    (ties count half), over the turns whose candidates include both; from the selections' explanations."""
    import numpy as np

    per_turn = []
    for qid, selection in selections.items():
        if not qrels.get(qid):
            continue
        candidates = selection.explanation["candidates"]
        relevant = [c[key] for c in candidates if qrels[qid].get(c["id"], 0) >= min_grade]
        other = [c[key] for c in candidates if qrels[qid].get(c["id"], 0) < min_grade]
        if relevant and other:
            wins = [float(r > o) + 0.5 * float(r == o) for r in relevant for o in other]
            per_turn.append(np.mean(wins))
    return float(np.mean(per_turn)) if per_turn else float("nan")


def leave_one_topic_out(per_turn: dict[str, dict[str, Any]], topics: list[str]) -> dict[str, Any]:
    """Each topic's turns scored by the row (O excepted) with the best mean of ``LOTO_MEASURES`` elsewhere.

    Returns:
        ``{topic: chosen row, ..., "per_turn": {measure: pooled held-out per-turn values}}``.
    """
    import numpy as np

    candidates = [label for label in per_turn if label != "o"]
    if not candidates:
        sys.exit("--loto needs methods other than o")
    topic_of = np.array(topics)
    pooled = {m: np.zeros(len(topics)) for m in per_turn[candidates[0]]}
    chosen: dict[str, Any] = {}
    for topic in sorted(set(topics)):
        held_out = topic_of == topic
        tuned = {
            label: np.mean([per_turn[label][m][~held_out].mean() for m in LOTO_MEASURES])
            for label in candidates
        }
        chosen[topic] = max(candidates, key=tuned.__getitem__)  # ties: the first row given
        for m in pooled:
            pooled[m][held_out] = per_turn[chosen[topic]][m][held_out]
    chosen["per_turn"] = pooled
    return chosen


def write_answers(path: Path, results: dict, qids: list[str]) -> None:
    import json

    from cast.infra.atomic import write_lines_atomic

    write_lines_atomic(path, (json.dumps(results[q].to_record(), ensure_ascii=False) + "\n" for q in qids))


def print_table(rows: dict, per_turn: dict, qids: list[str], args: argparse.Namespace) -> None:
    import pandas as pd

    from cast.evaluate.report import compare

    # Significance of each row against O on the text measures (words is a length, not a quality).
    tested = [m for m in MEASURES if m != "words"]
    frames = {
        label: pd.DataFrame({m: values[m] for m in tested}, index=qids) for label, values in per_turn.items()
    }
    comparison = compare(frames, "o" if "o" in frames else None, args.correction)
    print(
        f"\nCAsT 2022 dev, {len(qids)} turns with a written response; rewriter {args.rewriter}; "
        f"answers: {args.summarizer}, {args.words} words, from the chosen 3 of the top 10"
    )
    header = "| method | " + " | ".join(MEASURES) + " | chosen relevant % | select ms/turn mean (p95) |"
    print(header)
    print("|" + "---|" * (len(MEASURES) + 3))
    for label, row in rows.items():
        cells = [f"{row[m]:.2f}{'†' if comparison.significant(label, m) else ''}" for m in MEASURES]
        print(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {row['relevant']:.1f} | {row['ms']:.1f} ({row['ms_p95']:.1f}) |"
        )
    print(comparison.legend())


if __name__ == "__main__":
    sys.exit(run(main))
