"""Training the learnt sentence scorer of ``summarizer: learnt_extractive``: ``cast train sentence-scorer``.

It learns from answers files (``cast run``'s, e.g. the pooled benchmark's) of topics with written responses: every
sentence of a turn's selected passages gets the features of :mod:`cast.summarize.learnt_extractive` and, as its
target, its ROUGE-1 precision against the turn's written response (how much of the sentence the response
contains; stemmed, as ``cast eval answers`` scores).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cast.core.records import Selection, from_dict
from cast.evaluate.answers import response_references
from cast.formats.answers import read_answers
from cast.formats.topics import load_topics
from cast.infra.atomic import write_text_atomic
from cast.infra.trees import export
from cast.summarize.entity_extractive import Candidate, EntityExtractiveSummarizer
from cast.summarize.learnt_extractive import FEATURES, SentenceScorer, sentence_features


@dataclass(frozen=True)
class Options:
    """The boosted trees' rounds, depth and learning rate."""

    trees: int = 200
    depth: int = 3
    rate: float = 0.05


@dataclass
class TurnData:
    """One turn's candidate sentences with their features and targets, and what its answers need."""

    qid: str
    conversation: str
    reference: str
    question: str
    selection: Selection
    candidates: list[Candidate]
    features: Any
    targets: Any


def training_turns(answers: Path, topics: Path) -> list[TurnData]:
    """Every turn of an answers file whose topics give it a written response and whose selected passages have
    sentences (those both extractive generators read)."""
    import numpy as np
    from rouge_score.rouge_scorer import RougeScorer

    rouge = RougeScorer(["rouge1"], use_stemmer=True)
    sentences = EntityExtractiveSummarizer()
    conversations = load_topics(topics)
    references = response_references(conversations)
    conversation_of = {t.qid: c.topic_id for c in conversations for t in c.turns}
    turns: list[TurnData] = []
    records = read_answers(answers).records
    for qid, record in tqdm(records.items(), desc=f"features of {answers.name}", unit="turn"):
        if qid not in references or not record.get("selection"):
            continue
        selection = from_dict(Selection, record["selection"])
        candidates = sentences.candidates(selection)
        if not candidates:
            continue
        question = (record.get("rewrite") or {}).get("question") or record["query"]
        reference = references[qid][0]
        turns.append(
            TurnData(
                qid=qid,
                conversation=conversation_of[qid],
                reference=reference,
                question=question,
                selection=selection,
                candidates=candidates,
                features=sentence_features(question, selection, candidates),
                targets=np.array([rouge.score(reference, c.text)["rouge1"].precision for c in candidates]),
            )
        )
    return turns


def fit(turns: Sequence[TurnData], options: Options) -> Any:
    """A gradient-boosted regressor of the sentences' targets from their features."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingRegressor

    model = GradientBoostingRegressor(
        n_estimators=options.trees,
        max_depth=options.depth,
        learning_rate=options.rate,
        subsample=0.8,
        random_state=0,
    )
    return model.fit(np.vstack([t.features for t in turns]), np.concatenate([t.targets for t in turns]))


def train(turns: Sequence[TurnData], model: Path, options: Options, words: int) -> Path:
    """Fit on every turn and write the model file (JSON) to ``model``; ``words``: the word budget of the
    answers the turns were selected for (recorded)."""
    import numpy as np

    fitted = fit(turns, options)
    content = {
        "features": list(FEATURES),
        **export(fitted),
        "trained_on": {"turns": len(turns), "words": words, "target": "ROUGE-1 precision"},
        "feature_importances": dict(
            zip(FEATURES, np.round(fitted.feature_importances_, 4).tolist(), strict=True)
        ),
    }
    write_text_atomic(model, json.dumps(content) + "\n")
    SentenceScorer.load(model)
    return model
