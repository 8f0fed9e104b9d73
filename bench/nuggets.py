"""How far nugget scores (``cast eval nuggets``: the AutoNuggetizer design of TREC RAG 2024 and iKAT 2024) agree
with the judged rubric and with ROUGE and METEOR, on CAsT 2022 dev turns of the judged sample.

Systems: the two runs judged in a filled sheet of ``bench/judged.py`` (``old`` and ``new``: their answers as the
sheet shows them, with the judges' rubric), and two controls built from the ``old`` answers: its first sentence
only (``old-first-sentence``), and the answer of another turn (``other-turn``: the next turn's, an answer to
another question). Nuggets are made from each turn's written response; ROUGE-L and METEOR compare each answer
with the same response.

It prints each system's mean nugget scores, ROUGE-L, METEOR and, for the judged runs, the rubric; Kendall's tau
over the systems between each nugget score and ROUGE-L, METEOR, and the rubric's mean ``answers`` (over the
judged runs only: two systems, so only the sign of their difference can agree); and per-turn Spearman
correlations over every (system, turn) pair (with the rubric: over the judged runs' pairs).

A small model on 2 CPU cores makes a nugget list in minutes: ``--turns`` keeps the run within reach.

Usage:
    .venv/bin/python bench/nuggets.py --turns 4 --out runs/nuggets --cache-dir /tmp/nugget-cache
    .venv/bin/python bench/nuggets.py --base-url http://localhost:8000/v1 --model MODEL --out runs/nuggets-big
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from cast.benchmark.judged import judged_turns
from cast.benchmark.scripts import (
    DEV_2022_TOPICS,
    REPO,
    documented_parser,
    existing_path,
    run,
)

SHEET = REPO / "bench" / "judged" / "sheets" / "featured-snippet.judged.md"
KEY = REPO / "bench" / "judged" / "keys" / "featured-snippet.tsv"
JUDGED_RUNS = ("old", "new")
SYSTEMS = (*JUDGED_RUNS, "old-first-sentence", "other-turn")
RUBRIC_MEASURES = ("answers", "useful")
TEXT_MEASURES = ("ROUGE-L", "METEOR")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from cast.infra.engine import LOCAL

    parser = documented_parser(__doc__)
    parser.add_argument(
        "--sheet", type=existing_path, default=SHEET, help="a filled sheet (default: %(default)s)"
    )
    parser.add_argument("--key", type=existing_path, default=KEY, help="its key (default: %(default)s)")
    parser.add_argument("--topics", type=existing_path, default=DEV_2022_TOPICS, help="CAsT 2022 dev topics")
    parser.add_argument(
        "--turns", type=int, help="this many of the sheet's CAsT 2022 turns, spread over it (default: all)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the answers files and the nuggets"
    )
    parser.add_argument(
        "--base-url", default=LOCAL, help=f"the chat server (default {LOCAL}: the bundled model)"
    )
    parser.add_argument(
        "--model", help="the model's name on the server (default with local: the bundled one)"
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEMS,
        default=SYSTEMS,
        help="the systems scored (default: all; a slow model on a CPU: fewer)",
    )
    parser.add_argument("--max-nuggets", type=int, default=30, help="nuggets a turn at most (default 30)")
    parser.add_argument("--max-tokens", type=int, default=512, help="the longest model answer (default 512)")
    parser.add_argument(
        "--cache-dir", type=Path, required=True, help="the cache (and the bundled model's folder)"
    )
    return parser.parse_args(argv)


def system_answers(turns: list[tuple[str, dict[str, dict[str, Any]]]]) -> dict[str, dict[str, str]]:
    """``{system: {qid: answer}}``: the judged runs and the two controls of the module docstring."""
    from cast.infra.text import sentences

    systems: dict[str, dict[str, str]] = {run: {} for run in SYSTEMS}
    for number, (qid, runs) in enumerate(turns):
        for name in JUDGED_RUNS:
            systems[name][qid] = runs[name]["text"]
        systems["old-first-sentence"][qid] = (sentences(runs["old"]["text"]) or [runs["old"]["text"]])[0]
        systems["other-turn"][qid] = turns[(number + 1) % len(turns)][1]["old"]["text"]
    return systems


def write_answers(path: Path, answers: dict[str, str]) -> None:
    records = [{"qid": qid, "answer": {"text": text, "source_ids": []}} for qid, text in answers.items()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def kendall(x: list[float], y: list[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(x, y).statistic) if len(x) > 1 else math.nan


def spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    pairs = [(a, b) for a, b in zip(x, y, strict=True) if not (math.isnan(a) or math.isnan(b))]
    if len(pairs) < 3 or any(len(set(values)) == 1 for values in zip(*pairs, strict=True)):
        return math.nan  # undefined: too few pairs, or one side constant
    return float(spearmanr(*zip(*pairs, strict=True)).statistic)


def main() -> int:
    args = parse_args()
    from cast.errors import CastError
    from cast.evaluate.answers import TextScorer
    from cast.evaluate.experiment import evaluate_nugget_files
    from cast.evaluate.nuggets import MEASURES, Nuggetizer, NuggetSettings
    from cast.formats.topics import load_topics
    from cast.infra.cache import Cache
    from cast.infra.engine import BUNDLED_MODEL, LOCAL
    from cast.infra.llm import ChatClient, ChatServer

    if args.model is None and args.base_url != LOCAL:
        raise CastError("--model must name the model the server at --base-url serves")
    responses = {t.qid: t.response for c in load_topics(args.topics) for t in c.turns if t.response}
    judged = [
        (q, runs) for d, q, runs in judged_turns([args.sheet], args.key) if d == "cast2022" and q in responses
    ]
    if not judged:
        raise CastError(f"no CAsT 2022 turn of {args.sheet} has a written response in {args.topics}")
    step = max(len(judged) // (args.turns or len(judged)), 1)
    turns = judged[::step][: args.turns]
    systems = {name: answers for name, answers in system_answers(turns).items() if name in args.systems}
    args.out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, answers in systems.items():
        paths.append(args.out / f"{name}.answers.jsonl")
        write_answers(paths[-1], answers)

    folder = args.cache_dir.expanduser()
    server = ChatServer(args.base_url, None, timeout=3600, retries=1, concurrency=1)
    client = ChatClient(server, Cache(folder / "cache.sqlite"), models_dir=folder / "models")
    settings = NuggetSettings(
        model=args.model or BUNDLED_MODEL, max_nuggets=args.max_nuggets, max_tokens=args.max_tokens
    )
    nuggetizer = Nuggetizer(client, settings)
    scores, nuggets = evaluate_nugget_files(
        paths, nuggetizer=nuggetizer, nuggets_path=args.out / "nuggets.jsonl", topics=args.topics
    )
    scorer = TextScorer()
    rows: dict[str, dict[str, dict[str, float]]] = {}  # system -> qid -> measure
    for name, answers in systems.items():
        rows[name] = {}
        for qid, text in answers.items():
            row = {m: float(scores[name].loc[qid, m]) for m in MEASURES}
            row.update({m: scorer.score(text, [responses[qid]])[m] for m in TEXT_MEASURES})
            if name in JUDGED_RUNS:
                row.update(
                    {m: float(runs[name][m]) for q, runs in turns if q == qid for m in RUBRIC_MEASURES}
                )
            rows[name][qid] = row
    counts = client.counters()
    total = sum(len(t.nuggets) for t in nuggets.values())
    vital = sum(n.importance == "vital" for t in nuggets.values() for n in t.nuggets)
    empty = sum(not t.nuggets for t in nuggets.values())
    print(
        f"{len(turns)} turns ({', '.join(q for q, _ in turns)}), {total} nuggets ({vital} vital; "
        f"{empty} turns without one); {settings.model}: {counts['requests']} requests, {counts['cache_hits']} "
        f"from the cache; {nuggetizer.reply_counts()}"
    )
    report(rows)
    return 0


def mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def report(rows: dict[str, dict[str, dict[str, float]]]) -> None:
    """The tables of the module docstring."""
    from cast.evaluate.nuggets import MEASURES

    columns = [*MEASURES, *TEXT_MEASURES, *RUBRIC_MEASURES]
    means = {s: {m: mean([r.get(m, math.nan) for r in rows[s].values()]) for m in columns} for s in rows}
    print(f"\n| system | {' | '.join(columns)} |\n|{' --- |' * (len(columns) + 1)}")
    for system, values in means.items():
        print(f"| {system} | {' | '.join('-' if math.isnan(v) else f'{v:.3f}' for v in values.values())} |")
    judged = [s for s in rows if s in JUDGED_RUNS]
    others = [*TEXT_MEASURES, *RUBRIC_MEASURES]
    print(f"\nKendall's tau over systems (the rubric: over {len(judged)} judged runs)")
    print(f"| nugget score | {' | '.join(others)} |\n|{' --- |' * (len(others) + 1)}")
    for measure in MEASURES:
        taus = []
        for other in others:
            systems = judged if other in RUBRIC_MEASURES else list(rows)
            taus.append(kendall([means[s][measure] for s in systems], [means[s][other] for s in systems]))
        print(f"| {measure} | {' | '.join(f'{t:.2f}' for t in taus)} |")
    print("\nSpearman's rho per turn, over (system, turn) pairs (the rubric: the judged runs' pairs)")
    print(f"| nugget score | {' | '.join(others)} |\n|{' --- |' * (len(others) + 1)}")
    for measure in MEASURES:
        rhos = []
        for other in others:
            pairs = [r for s in (judged if other in RUBRIC_MEASURES else rows) for r in rows[s].values()]
            rhos.append(spearman([r[measure] for r in pairs], [r[other] for r in pairs]))
        print(f"| {measure} | {' | '.join(f'{r:.2f}' for r in rhos)} |")


if __name__ == "__main__":
    sys.exit(run(main))
