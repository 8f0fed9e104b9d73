"""The pooled development benchmark's datasets: their topics, how their turns are judged, and the collection
that holds every dataset's passages (``bench/pooled.py`` describes how to build its index).

Example:
    >>> from cast.benchmark.datasets import DATASETS
    >>> [dataset.name for dataset in DATASETS]
    ['cast2022', 'ikat2023-train', 'ikat2023-test']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cast.core.records import Conversation
from cast.formats.topics import load_topics, provenance_qrels, read_qrels


@dataclass(frozen=True)
class Dataset:
    """One benchmark dataset: a topics file and how its turns are judged.

    Attributes:
        name: the dataset's name in tables and in ``per-turn.tsv``.
        topics: the topics file, relative to the data folder.
        qrels: a qrels file relative to the data folder, or None for each turn's ``response_provenance``.
    """

    name: str
    topics: str
    qrels: str | None = None


DATASETS = (
    Dataset(
        "cast2022",
        "cast/2022-dev/2022_evaluation_topics_flattened_duplicated_v1.0.json",
        "cast/2022-dev/cast2022.provenance.qrel",
    ),
    Dataset("ikat2023-train", "ikat/2023_train_topics.json"),
    Dataset("ikat2023-test", "ikat/2023_test_topics_9-14.json"),
)
# The collection's files, relative to the data folder: the Wikipedia passages and every dataset's provenance.
COLLECTION = (
    "wiki/enwiki-2013-core.jsonl.gz",
    "cast/2022-dev/provenance_passages.jsonl",
    "ikat/2023_train_topics_psg_text.jsonl",
    "ikat/2023_test_topics_9-14_psg_text.jsonl",
)


def load_dataset(data: Path, dataset: Dataset, max_turns: int | None = None) -> list[Conversation]:
    """The dataset's conversations; with ``max_turns``, only its first that many distinct turns, in file order,
    each with every earlier turn of its conversation (a conversation that adds no turn of them is left out)."""
    conversations = load_topics(data / dataset.topics)
    if max_turns is None:
        return conversations
    kept: list[Conversation] = []
    seen: set[str] = set()
    for conversation in conversations:
        turns = list(conversation.turns)
        new = [i for i, t in enumerate(turns) if t.qid not in seen][: max_turns - len(seen)]
        if new:
            seen.update(turns[i].qid for i in new)
            kept.append(replace(conversation, turns=tuple(turns[: new[-1] + 1])))
    return kept


def dataset_qrels(
    data: Path, dataset: Dataset, conversations: Sequence[Conversation]
) -> dict[str, dict[str, int]]:
    """The dataset's qrels: its file, or each turn's ``response_provenance`` as relevant (grade 1)."""
    if dataset.qrels is not None:
        return read_qrels(data / dataset.qrels)
    return provenance_qrels(conversations)


def topic_of(dataset: Dataset, conversation: Conversation) -> str:
    """The topic a conversation belongs to, for leave-one-topic-out: CAsT 2022's paths of one topic share turns,
    and iKAT's conversations ``9-1`` and ``9-2`` share a topic."""
    return f"{dataset.name.split('-')[0]}:{conversation.topic_id.split('-')[0]}"
