"""The learnt sentence scorer of ``summarizer: learnt_extractive``, tested leave-one-topic-out on the pooled dev
benchmark.

Reads the answers files of a pooled benchmark run (``bench/pooled.py run --out DIR``): each turn's selected
passages, their entities and the question the answer answers, the sentences' features and targets as
``cast train sentence-scorer`` makes them (``cast/train/sentence_scorer.py``). The script answers each topic's
turns with a model trained on the other topics only (a topic's CAsT 2022 paths or iKAT conversations stay
together) and prints ROUGE-1/L, METEOR and BLEU-1 per dataset and pooled beside the hand-weighted generator's
answers from the same passages at the same length (paired t-test and randomisation test, † where both give
p < 0.05). The bundled model is trained on every turn by ``cast train sentence-scorer --answers RUN/*.answers.jsonl
--topics ...``.

Usage:
    .venv/bin/python bench/learnt_extractive.py --run runs/pooled/offline --words 70
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cast.benchmark.datasets import DATASETS
from cast.benchmark.scripts import (
    DATA,
    existing_path,
    run,
)

MEASURES = ("ROUGE-1", "ROUGE-L", "METEOR", "BLEU-1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd
    from tqdm import tqdm

    from cast.evaluate.answers import TextScorer
    from cast.evaluate.significance import SIGNIFICANT_MARK, paired_test
    from cast.summarize.entity_extractive import EntityExtractiveSummarizer, SentencePicker, entity_ranks
    from cast.train.sentence_scorer import Options, fit, training_turns

    args = parse_args(argv)
    started = time.perf_counter()
    turns = []  # (dataset, topic, turn)
    for dataset in DATASETS:
        for turn in training_turns(args.run / f"{dataset.name}.answers.jsonl", args.data / dataset.topics):
            # A topic's CAsT 2022 paths, or iKAT's conversations 9-1 and 9-2, are one topic.
            turns.append(
                (dataset.name, f"{dataset.name.split('-')[0]}:{turn.conversation.split('-')[0]}", turn)
            )
    print(f"{len(turns)} turns, {sum(len(t.candidates) for _, _, t in turns)} candidate sentences")
    hand_weighted = EntityExtractiveSummarizer(words=args.words, novelty_weight=args.novelty)
    # As the learnt generator picks: the scorer reads entity coverage and position itself.
    learnt = SentencePicker(
        words=args.words,
        entity_weight=0.0,
        novelty_weight=args.novelty,
        min_sentence_words=4,
        position_weight=0.0,
        fill=True,
    )
    options = Options(trees=args.trees, depth=args.depth, rate=args.rate)
    scorer = TextScorer()
    rows = []
    for topic in tqdm(sorted({topic for _, topic, _ in turns}), desc="leave-one-topic-out", unit="topic"):
        model = fit([t for _, other, t in turns if other != topic], options)
        for dataset, _, turn in (item for item in turns if item[1] == topic):
            picked = learnt.pick(
                turn.candidates, entity_ranks(turn.selection), model.predict(turn.features).tolist()
            )
            answers = {
                "hand-weighted": hand_weighted.summarize(turn.question, turn.selection).text,
                "learnt": " ".join(c.text for c in sorted(picked, key=lambda c: c.order)),
            }
            row = {"dataset": dataset, "qid": turn.qid}
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
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
