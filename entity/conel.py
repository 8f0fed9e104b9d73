"""ConEL-2 (entity linking in Wizard-of-Wikipedia conversations): reading the data and scoring runs.

The data (``ConEL22_EL_{Train,Val}.json``) is a list of dialogues, each with ``turns`` of ``speaker``
(``USER``/``SYSTEM``), ``utterance`` and, on user turns, ``el_annotations`` (``mention``, ``entity`` as a
Wikipedia title with underscores, ``span``). Runs and the val gold are lists of
``[dialogue_id, turn_number, mention, entity]`` rows, as the dataset's published peer runs are.

Scoring (:func:`score`) is the published way: a row counts when dialogue, turn, mention without a leading article
and entity all match; rows are compared as sets (a mention linked twice in a turn counts once).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from cast.errors import DataFormatError
from cast.textfiles import TOPICS_BYTES, read_json

_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class ConelTurn:
    """One turn of a ConEL-2 dialogue.

    Attributes:
        dialogue_id: the dialogue's id (a string).
        turn: the turn number within the dialogue.
        speaker: ``USER`` or ``SYSTEM``.
        utterance: what was said.
        links: the gold ``(mention, entity)`` pairs (user turns only; entity as a title with underscores).
    """

    dialogue_id: str
    turn: int
    speaker: str
    utterance: str
    links: tuple[tuple[str, str], ...] = ()


class Link(NamedTuple):
    """One row of a ConEL run or gold file."""

    dialogue_id: str
    turn: int
    mention: str
    entity: str


class Scores(NamedTuple):
    precision: float
    recall: float
    f1: float
    true_positives: int
    found: int
    gold: int


def read_dialogues(path: str | Path) -> list[list[ConelTurn]]:
    """The dialogues of a ConEL-2 data file, each a list of turns in order."""
    path = Path(path)
    data = _read_list(path, "a list of dialogues")
    dialogues = []
    for number, dialogue in enumerate(data, 1):
        try:
            dialogue_id = str(dialogue["dialogue_id"])
            turns = [
                ConelTurn(
                    dialogue_id,
                    int(turn["turn_number"]),
                    str(turn["speaker"]),
                    str(turn["utterance"]),
                    tuple((a["mention"], a["entity"]) for a in turn.get("el_annotations") or ()),
                )
                for turn in dialogue["turns"]
            ]
        except (KeyError, TypeError, ValueError) as e:
            raise DataFormatError(path, f"dialogue {number}: missing or malformed field {e}") from e
        dialogues.append(turns)
    return dialogues


def read_links(path: str | Path) -> list[Link]:
    """The rows of a ConEL run or gold file (``[dialogue_id, turn_number, mention, entity]``)."""
    path = Path(path)
    data = _read_list(path, "a list of [dialogue_id, turn_number, mention, entity] rows")
    links = []
    for number, row in enumerate(data, 1):
        if not isinstance(row, list) or len(row) != 4:
            raise DataFormatError(path, f"row {number} is not [dialogue_id, turn_number, mention, entity]")
        try:
            links.append(Link(str(row[0]), int(row[1]), str(row[2]), str(row[3])))
        except (TypeError, ValueError) as e:
            raise DataFormatError(path, f"row {number}: turn number {row[1]!r} is not a number") from e
    return links


def gold_links(dialogues: Iterable[Sequence[ConelTurn]]) -> list[Link]:
    """The gold rows of dialogues read by :func:`read_dialogues`."""
    return [
        Link(turn.dialogue_id, turn.turn, mention, entity)
        for dialogue in dialogues
        for turn in dialogue
        for mention, entity in turn.links
    ]


def mention_key(mention: str) -> str:
    """A mention as the scorer compares it: without surrounding space and a leading article."""
    return _ARTICLE.sub("", mention.strip())


def _key(link: Link) -> tuple[str, int, str, str]:
    return (str(link.dialogue_id), int(link.turn), mention_key(link.mention), link.entity)


def score(run: Iterable[Link], gold: Iterable[Link]) -> Scores:
    """Precision, recall and F1 of ``run`` against ``gold`` (rows compared as sets; see the module docstring).

    Example:
        >>> gold = [Link("1", 0, "the hockey", "Hockey"), Link("1", 0, "sports", "Sport")]
        >>> score([Link("1", 0, "hockey", "Hockey"), Link("1", 0, "fun", "Fun")], gold)[:3]
        (0.5, 0.5, 0.5)
    """
    found = {_key(link) for link in run}
    expected = {_key(link) for link in gold}
    hits = len(found & expected)
    precision = hits / len(found) if found else 0.0
    recall = hits / len(expected) if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(precision, recall, f1, hits, len(found), len(expected))


def _read_list(path: Path, what: str) -> list[Any]:
    data = read_json(path, TOPICS_BYTES, "ConEL-2 file")
    if not isinstance(data, list):
        raise DataFormatError(path, f"expected {what}")
    return data
