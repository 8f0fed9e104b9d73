"""Passage selection benchmark (issue 5): the paper's Table 1 on the CAsT 2022 dev benchmark.

For each selection method (O, ER, EG at several gamma, EG+EP, ...) the extractive answer built from the chosen
passages (``--summarizer``, ``topk_trim`` by default) is scored against each turn's written response: words,
ROUGE-1/2/L, BLEU-1/4, METEOR (``cast.evaluate.answers``), the share of chosen passages judged relevant, and the
selection time per turn with warm caches. Methods marked † differ from O significantly (paired t-test and
randomisation test, p < 0.05) on that measure.

The pipeline (rewrite, retrieval, re-ranking, entity linking of the candidates) runs once; only selection and
summarisation are re-run per method, on the stored turn results, following each conversation's path so that
history entities and the focus entity (for EP) are those each method would have seen.

Usage:
    .venv/bin/python bench/answers.py                      # all methods, manual rewrites
    .venv/bin/python bench/answers.py --methods o eg.25 --prepared /tmp/prepared.pkl
    .venv/bin/python bench/answers.py --summarizer entity_extractive --answers-dir runs/
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

# numpy's OpenBLAS worker threads crash the process (SIGSEGV) once the JVM runs; the selection matrices are
# small, one BLAS thread is enough. Set before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATA = REPO.parent / "shared" / "data" / "cast" / "2022-dev"
TOPICS = DATA / "2022_evaluation_topics_flattened_duplicated_v1.0.json"
QRELS = DATA / "cast2022.provenance.qrel"
INDEX = REPO.parent / "cache" / "indexes" / "cast2022-dev"
MEASURES = ("words", "ROUGE-1", "ROUGE-2", "ROUGE-L", "BLEU-1", "BLEU-4", "METEOR")

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
    "er-relorder": {"name": "er", "passage_order": "relevance", **PAPER},
    "er-interp": {"name": "er", **INTERPOLATE},
    "eg.25-interp": {"name": "eg", "gamma": 0.25, **INTERPOLATE},
    "eg1-interp": {"name": "eg", "gamma": 1.0, **INTERPOLATE},
    "eg.25+ep-interp": {"name": "eg", "gamma": 0.25, "path_bonus": 0.1, **INTERPOLATE},
}
DEFAULT_METHODS = ["o", "er", "eg0", "eg.25", "eg.5", "eg.75", "eg1", "eg.25+ep", "er-interp", "eg.25-interp"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("Usage:")[1])
    parser.add_argument("--topics", type=Path, default=TOPICS, help="CAsT 2022 topics with written responses")
    parser.add_argument("--qrels", type=Path, default=QRELS, help="qrels judging the chosen passages")
    parser.add_argument("--index", type=Path, default=INDEX, help="Krovetz index of the benchmark collection")
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
        "--prepared", type=Path, help="pickle of the pipeline's turn results: read if present, else written"
    )
    parser.add_argument(
        "--answers-dir", type=Path, help="write <method>.answers.jsonl here (for `cast explain`)"
    )
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace, conversations: list, resources: Any, config: dict) -> dict[str, Any]:
    """The pipeline's turn results by qid, with the candidates entity-linked (run once, or read back)."""
    from cast.pipeline import Pipeline

    key = {"config": config, "topics": str(args.topics), "limit": args.limit}
    if args.prepared and args.prepared.is_file():
        with args.prepared.open("rb") as f:
            stored = pickle.load(f)
        if stored["key"] != key:
            sys.exit(f"{args.prepared} was made with other settings; delete it or pass another --prepared")
        return stored["results"]
    start = time.perf_counter()
    results = {r.qid: r for r in Pipeline.from_config(config, resources).run(conversations, progress=True)}
    print(f"pipeline: {len(results)} turns in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.prepared:
        partial = args.prepared.with_name(args.prepared.name + ".partial")
        with partial.open("wb") as f:
            pickle.dump({"key": key, "results": results}, f)
        os.replace(partial, args.prepared)
    return results


def select_all(
    conversations: list, results: dict[str, Any], selector: Any
) -> tuple[dict[str, Any], list[float]]:
    """Each turn's selection, following the conversation paths; and the selection seconds of each turn."""
    from cast.stages import SelectionInput

    selections: dict[str, Any] = {}
    seconds: list[float] = []
    for conversation in conversations:
        history: list = []
        focus = None
        for turn in conversation.turns:
            result = results[turn.qid]
            if turn.qid not in selections:
                candidates = tuple(result.ranking[: selector.candidates])
                inputs = SelectionInput(
                    query=result.rewrite.query,
                    candidates=candidates,
                    query_entities=result.query_entities,
                    history_entities=tuple(history),
                    passage_entities=tuple(result.passage_entities.get(p.id, ()) for p in candidates),
                    previous_focus_entity=focus,
                )
                start = time.perf_counter()
                selections[turn.qid] = selector.select(inputs)
                seconds.append(time.perf_counter() - start)
            focus = selections[turn.qid].focus_entity
            history.extend(result.query_entities)
    return selections, seconds


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from cast.config import load_config
    from cast.evaluate.answers import TextScorer, words
    from cast.registry import build_stage
    from cast.resources import Resources
    from cast.topics import load_topics, read_qrels

    args = parse_args(argv)
    conversations = load_topics(args.topics)[: args.limit]
    qrels = read_qrels(args.qrels)
    config = load_config(
        args.config,
        [f"index={args.index}", f"rewriter.name={args.rewriter}", "selector.name=eg", *args.overrides],
    )
    resources = Resources(config)
    results = prepare(args, conversations, resources, config)
    base_selector = {k: v for k, v in config["selector"].items() if k in ("candidates", "n")}
    summarizer = build_stage("summarizer", {"name": args.summarizer, "words": args.words}, resources)
    scorer = TextScorer()
    references = {t.qid: t.response for c in conversations for t in c.turns if t.response}
    qids = [qid for qid in results if qid in references]

    rows: dict[str, dict[str, float]] = {}
    per_turn: dict[str, dict[str, np.ndarray]] = {}
    for label in args.methods:
        selector = build_stage("selector", {**base_selector, **METHODS[label]}, resources)
        select_all(conversations, results, selector)  # warm the knowledge base's memo
        selections, seconds = select_all(conversations, results, selector)
        answers = dict(
            zip(
                qids,
                summarizer.summarize_batch([(results[q].rewrite.query, selections[q]) for q in qids]),
                strict=True,
            )
        )
        scores = {q: scorer.score(answers[q].text, [references[q]]) for q in qids}
        for q in qids:
            scores[q]["words"] = float(len(words(answers[q].text)))
        per_turn[label] = {m: np.array([scores[q][m] for q in qids]) for m in MEASURES}
        judged = [q for q in qids if qrels.get(q)]
        relevant = [
            np.mean([qrels[q].get(p.id, 0) >= args.min_grade for p in selections[q].passages]) for q in judged
        ]
        rows[label] = {
            **{m: float(per_turn[label][m].mean()) for m in MEASURES},
            "relevant": 100 * float(np.mean(relevant)),
            "ms": 1000 * float(np.mean(seconds)),
            "ms_p95": 1000 * float(np.percentile(seconds, 95)),
        }
        if args.answers_dir:
            write_answers(args.answers_dir / f"{label}.answers.jsonl", results, selections, answers, qids)
        print(f"{label}: done", file=sys.stderr)
    print_table(rows, per_turn, len(qids), args)
    return 0


def write_answers(path: Path, results: dict, selections: dict, answers: dict, qids: list[str]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as f:
        for qid in qids:
            record = replace(results[qid], selection=selections[qid], answer=answers[qid]).to_record()
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def print_table(rows: dict, per_turn: dict, turns: int, args: argparse.Namespace) -> None:
    from cast.evaluate.significance import paired_test

    baseline = "o" if "o" in per_turn else None
    print(
        f"\nCAsT 2022 dev, {turns} turns with a written response; rewriter {args.rewriter}; "
        f"answers: {args.summarizer}, {args.words} words, from the chosen 3 of the top 10"
    )
    header = "| method | " + " | ".join(MEASURES) + " | chosen relevant % | select ms/turn mean (p95) |"
    print(header)
    print("|" + "---|" * (len(MEASURES) + 3))
    for label, row in rows.items():
        cells = []
        for m in MEASURES:
            mark = ""
            if baseline and label != baseline and m != "words":
                if paired_test(per_turn[label][m], per_turn[baseline][m]).significant():
                    mark = "†"
            cells.append(f"{row[m]:.2f}{mark}")
        print(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {row['relevant']:.1f} | {row['ms']:.1f} ({row['ms_p95']:.1f}) |"
        )


if __name__ == "__main__":
    sys.exit(main())
