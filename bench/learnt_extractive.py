"""Train and test the learnt sentence scorer of ``summarizer: learnt_extractive`` on the pooled dev benchmark.

Reads the answers files of a pooled benchmark run (``bench/pooled.py run --out DIR``): each turn's selected
passages, their entities and the question the answer answers. Every sentence of the selected passages gets the
features of :mod:`summarize.learnt_extractive` and, as its target, its ROUGE-1 precision against the turn's
written response (how much of the sentence the response contains; stemmed, as ``cast eval answers`` scores).

The script answers each topic's turns with a model trained on the other topics only (leave-one-topic-out; a
topic's CAsT 2022 paths or iKAT conversations stay together) and prints ROUGE-1/L, METEOR and BLEU-1 per dataset
and pooled beside the hand-weighted generator's answers from the same passages at the same length (paired
t-test and randomisation test, † where both give p < 0.05). ``--train`` then fits the bundled model on every
turn (``summarize/data/sentence-scorer.json``).

Usage:
    .venv/bin/python bench/learnt_extractive.py --run runs/pooled/offline --words 70
    .venv/bin/python bench/learnt_extractive.py --run runs/pooled/offline --words 70 --train
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import DATA, existing_path, run  # noqa: E402
from bench.pooled import DATASETS, load_dataset, topic_of  # noqa: E402

MEASURES = ("ROUGE-1", "ROUGE-L", "METEOR", "BLEU-1")


@dataclass
class TurnData:
    """One turn's candidate sentences with their features and targets, and what its answers need."""

    dataset: str
    topic: str
    qid: str
    reference: str
    question: str
    selection: Any
    candidates: list
    features: Any
    targets: Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from summarize.learnt_extractive import BUNDLED_MODEL

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="usage examples:" + __doc__.split("Usage:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--run", type=existing_path, required=True, help="a bench/pooled.py run's --out folder"
    )
    parser.add_argument(
        "--data", type=existing_path, default=DATA, help="the data folder (default: %(default)s)"
    )
    parser.add_argument("--words", type=int, default=50, help="the answers' word budget (default 50)")
    parser.add_argument(
        "--novelty", type=float, default=0.1, help="the generators' novelty_weight (default 0.1)"
    )
    parser.add_argument("--trees", type=int, default=200, help="boosting rounds (default 200)")
    parser.add_argument("--depth", type=int, default=3, help="tree depth (default 3)")
    parser.add_argument("--rate", type=float, default=0.05, help="learning rate (default 0.05)")
    parser.add_argument("--train", action="store_true", help="fit on every turn and write --model")
    parser.add_argument(
        "--model", type=Path, default=BUNDLED_MODEL, help="where --train writes (default: %(default)s)"
    )
    return parser.parse_args(argv)


def load_turns(args: argparse.Namespace) -> list[TurnData]:
    """Every turn of the run with a written response and candidate sentences."""
    import numpy as np
    from rouge_score.rouge_scorer import RougeScorer
    from tqdm import tqdm

    from cast.evaluate.answers import read_answers, response_references
    from cast.records import Selection, from_dict
    from summarize.entity_extractive import EntityExtractiveSummarizer
    from summarize.learnt_extractive import sentence_features

    rouge = RougeScorer(["rouge1"], use_stemmer=True)
    generator = EntityExtractiveSummarizer()  # its sentences: both generators read the same candidates
    turns: list[TurnData] = []
    for dataset in DATASETS:
        conversations = load_dataset(args.data, dataset)
        references = response_references(conversations)
        topics = {t.qid: topic_of(dataset, c) for c in conversations for t in c.turns}
        answers = read_answers(args.run / f"{dataset.name}.answers.jsonl")
        for qid, record in tqdm(answers.records.items(), desc=f"features of {dataset.name}", unit="turn"):
            if qid not in references or not record.get("selection"):
                continue
            selection = from_dict(Selection, record["selection"])
            candidates = generator.candidates(selection)
            if not candidates:
                continue
            question = (record.get("rewrite") or {}).get("question") or record["query"]
            reference = references[qid][0]
            turns.append(
                TurnData(
                    dataset=dataset.name,
                    topic=topics[qid],
                    qid=qid,
                    reference=reference,
                    question=question,
                    selection=selection,
                    candidates=candidates,
                    features=sentence_features(question, selection, candidates),
                    targets=np.array(
                        [rouge.score(reference, c.text)["rouge1"].precision for c in candidates]
                    ),
                )
            )
    return turns


def fit(args: argparse.Namespace, turns: list[TurnData]) -> Any:
    import numpy as np
    from sklearn.ensemble import GradientBoostingRegressor

    model = GradientBoostingRegressor(
        n_estimators=args.trees, max_depth=args.depth, learning_rate=args.rate, subsample=0.8, random_state=0
    )
    return model.fit(np.vstack([t.features for t in turns]), np.concatenate([t.targets for t in turns]))


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import pandas as pd
    from tqdm import tqdm

    from cast.atomic import write_text_atomic
    from cast.evaluate.answers import TextScorer
    from cast.evaluate.significance import SIGNIFICANT_MARK, paired_test
    from cast.trees import export
    from summarize.entity_extractive import EntityExtractiveSummarizer, entity_ranks
    from summarize.learnt_extractive import FEATURES

    args = parse_args(argv)
    started = time.perf_counter()
    turns = load_turns(args)
    print(f"{len(turns)} turns, {sum(len(t.candidates) for t in turns)} candidate sentences")
    hand_weighted = EntityExtractiveSummarizer(words=args.words, novelty_weight=args.novelty)
    learnt = EntityExtractiveSummarizer(
        words=args.words, novelty_weight=args.novelty, entity_weight=0.0, position_weight=0.0
    )
    scorer = TextScorer()
    rows = []
    topics = sorted({t.topic for t in turns})
    for topic in tqdm(topics, desc="leave-one-topic-out", unit="topic"):
        model = fit(args, [t for t in turns if t.topic != topic])
        for turn in (t for t in turns if t.topic == topic):
            picked = learnt.pick(
                turn.question,
                turn.candidates,
                entity_ranks(turn.selection),
                relevance=model.predict(turn.features),
            )
            answers = {
                "hand-weighted": hand_weighted.summarize(turn.question, turn.selection).text,
                "learnt": " ".join(c.text for c in sorted(picked, key=lambda c: c.order)),
            }
            row = {"dataset": turn.dataset, "qid": turn.qid}
            for name, text in answers.items():
                row.update(
                    {
                        f"{name} {m}": v
                        for m, v in scorer.score(text, [turn.reference]).items()
                        if m in MEASURES
                    }
                )
            rows.append(row)
    frame = pd.DataFrame(rows)
    print(f"\n{args.words}-word answers from {args.run}: hand-weighted -> learnt (leave-one-topic-out)")
    for name, group in [*frame.groupby("dataset"), ("pooled", frame)]:
        cells = []
        for m in MEASURES:
            test = paired_test(group[f"learnt {m}"].to_numpy(), group[f"hand-weighted {m}"].to_numpy())
            mark = SIGNIFICANT_MARK if test.significant() else ""
            cells.append(
                f"{m} {group[f'hand-weighted {m}'].mean():.2f} -> {group[f'learnt {m}'].mean():.2f}{mark}"
            )
        print(f"  {name} ({len(group)} turns): " + "; ".join(cells))
    if args.train:
        model = fit(args, turns)
        data = {
            "features": list(FEATURES),
            **export(model),
            "trained_on": {"turns": len(turns), "words": args.words, "target": "ROUGE-1 precision"},
            "feature_importances": dict(
                zip(FEATURES, np.round(model.feature_importances_, 4).tolist(), strict=True)
            ),
        }
        write_text_atomic(args.model, json.dumps(data) + "\n")
        print(f"wrote {args.model}")
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
