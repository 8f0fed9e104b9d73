"""TREC iKAT (2023-2025) topic files: conversations with the user's personal text knowledge base (PTKB).

The three years' files differ; each is read as distributed (:func:`read_ikat_topics`, chosen by
:func:`cast.topics.load_topics` when the topics carry a ``ptkb``):

============================  ==========================  ==========================  ===========================
                              2023 (train, test)          2024 (test)                 2025 (test)
============================  ==========================  ==========================  ===========================
conversation ``number``       string ``"9-1"``            int ``0``                   string ``"1-1"``
``ptkb``                      ``{"1": "I'm ...", ...}``   the same                    a list, numbered from 1
turns                         ``turns``                   ``turns``                   ``responses``
utterance                     ``utterance``               ``utterance``               ``user_utterance``
relevant statements           ``ptkb_provenance`` (ids)   ``ptkb_provenance`` (ids)   ``relevant_ptkbs`` (texts)
response passages             ``response_provenance``     ``response_provenance``     ``citations``
============================  ==========================  ==========================  ===========================

Every year has ``turn_id`` (an int), ``resolved_utterance`` (the manual rewrite, -> ``Turn.manual_rewrite``)
and ``response`` (the organisers' written response). Qids are ``<number>_<turn_id>`` as in the official qrels
(``9-1_3``, ``0_2``). An empty ``resolved_utterance`` is read as none. Passage ids are ClueWeb22 passage ids, ``clueweb22-en0034-09-03452:1``. A malformed file
raises one :class:`~cast.errors.DataFormatError` naming the file, the conversation and turn, and the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cast.errors import DataFormatError, excerpt
from cast.records import Conversation, PTKBStatement, Turn

# Per turn: (the key of the utterance, of the relevant statements, of the response passages); first found wins.
# A turn or statement number, as run files write it.
_DIGITS = re.compile(r"[0-9]+")
_TURN_KEYS = {
    "turns": ("utterance", "ptkb_provenance", "response_provenance"),
    "responses": ("user_utterance", "relevant_ptkbs", "citations"),
}


def is_ikat(data: Any) -> bool:
    """Whether parsed JSON looks like an iKAT topics file (a list of conversations with a ``ptkb``)."""
    return isinstance(data, list) and bool(data) and all(isinstance(c, dict) and "ptkb" in c for c in data)


def read_ikat_topics(path: str | Path, data: Any) -> list[Conversation]:
    """The conversations of a parsed iKAT topics file (any year; see the module docstring).

    Raises:
        DataFormatError: naming the file, where, and the field that is missing or of the wrong type.
    """
    if not is_ikat(data):
        raise DataFormatError(path, "an iKAT topics file is a JSON list of conversations, each with a 'ptkb'")
    conversations = []
    seen: set[str] = set()
    for index, item in enumerate(data):
        topic_id = _number(path, item, f"conversation #{index + 1}")
        if topic_id in seen:
            raise DataFormatError(
                path, f"conversation {topic_id}: 'number' {topic_id!r} appears a second time"
            )
        seen.add(topic_id)
        ptkb = _ptkb(path, item["ptkb"], topic_id)
        turns_key = next((key for key in _TURN_KEYS if key in item), None)
        if turns_key is None or not isinstance(item[turns_key], list) or not item[turns_key]:
            raise DataFormatError(path, f"conversation {topic_id}: no 'turns' (or 2025 'responses') list")
        turns = tuple(
            _turn(path, topic_id, ptkb, turn, _TURN_KEYS[turns_key], f"conversation {topic_id}, turn #{n}")
            for n, turn in enumerate(item[turns_key], start=1)
        )
        qids = [turn.qid for turn in turns]
        repeated = sorted({qid for qid in qids if qids.count(qid) > 1})
        if repeated:
            raise DataFormatError(path, f"conversation {topic_id}: 'turn_id' repeats turns {repeated}")
        title = item.get("title")
        conversations.append(
            Conversation(topic_id, turns, title=title if isinstance(title, str) else None, ptkb=ptkb)
        )
    return conversations


def _number(path: str | Path, item: dict, where: str) -> str:
    number = item.get("number")
    if isinstance(number, bool) or not isinstance(number, str | int) or not str(number).strip():
        raise DataFormatError(path, f"{where}: 'number' is {excerpt(number)}; expected e.g. '9-1' or 0")
    text = str(number).strip()
    if "_" in text or any(character.isspace() for character in text):
        raise DataFormatError(path, f"{where}: 'number' {text!r} has '_' or spaces (it starts each qid)")
    return text


def _ptkb(path: str | Path, value: Any, topic_id: str) -> tuple[PTKBStatement, ...]:
    """2023-2024: ``{"1": text, ...}``; 2025: ``[text, ...]``, numbered from 1."""
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value, start=1)
        if isinstance(value, list)
        else None
    )
    if items is None:
        raise DataFormatError(
            path, f"conversation {topic_id}: 'ptkb' is {type(value).__name__}, expected a dict or list"
        )
    statements: dict[str, PTKBStatement] = {}
    for key, text in items:
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(
                path, f"conversation {topic_id}: 'ptkb' statement {key} is not a non-empty string"
            )
        statement_id = str(key).strip()
        if not _DIGITS.fullmatch(statement_id):  # run files give statement ids as integers
            raise DataFormatError(
                path, f"conversation {topic_id}: 'ptkb' statement id {excerpt(key)} is not a number"
            )
        if statement_id in statements:
            raise DataFormatError(
                path,
                f"conversation {topic_id}: 'ptkb' statement id {statement_id} appears twice ({excerpt(key)})",
            )
        statements[statement_id] = PTKBStatement(id=statement_id, text=text.strip())
    return tuple(statements.values())


def _turn(
    path: str | Path,
    topic_id: str,
    ptkb: tuple[PTKBStatement, ...],
    turn: Any,
    keys: tuple[str, str, str],
    where: str,
) -> Turn:
    utterance_key, relevant_key, provenance_key = keys
    if not isinstance(turn, dict):
        raise DataFormatError(path, f"{where} is not a JSON object")
    turn_id = turn.get("turn_id")
    if (
        isinstance(turn_id, bool)
        or not isinstance(turn_id, int | str)
        or not _DIGITS.fullmatch(str(turn_id).strip())
    ):
        # The qid's turn number: run files and the organisers' validators take ASCII digits only.
        raise DataFormatError(path, f"{where}: 'turn_id' is {excerpt(turn_id)}; expected a number (e.g. 3)")
    qid = f"{topic_id}_{str(turn_id).strip()}"
    return Turn(
        qid=qid,
        topic_id=topic_id,
        turn_id=str(turn_id).strip(),
        utterance=_required_text(path, turn, utterance_key, qid),
        # An empty one (2023 test turn 12-1_12) is none: the manual rewriter then needs its `fallback`.
        manual_rewrite=_text(path, turn, "resolved_utterance", qid) or None,
        response=_text(path, turn, "response", qid),
        response_ids=_strings(path, turn, provenance_key, qid),
        ptkb_relevant=_relevant(path, turn, relevant_key, qid, ptkb),
    )


def _text(path: str | Path, turn: dict, key: str, qid: str) -> str | None:
    return None if turn.get(key) is None else _required_text(path, turn, key, qid)


def _required_text(path: str | Path, turn: dict, key: str, qid: str) -> str:
    value = turn.get(key)
    if not isinstance(value, str):
        found = "missing" if value is None else f"{type(value).__name__}"
        raise DataFormatError(path, f"turn {qid}: {key!r} is {found}, expected a string")
    return value


def _strings(path: str | Path, turn: dict, key: str, qid: str) -> tuple[str, ...]:
    value = turn.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DataFormatError(
            path, f"turn {qid}: {key!r} must be a list of passage ids, found {excerpt(value)}"
        )
    return tuple(value)


def _relevant(
    path: str | Path, turn: dict, key: str, qid: str, ptkb: tuple[PTKBStatement, ...]
) -> tuple[str, ...]:
    """The ids of the statements judged relevant: 2023-2024 give ids (ints), 2025 the statements' texts."""
    value = turn.get(key, [])
    if not isinstance(value, list):
        raise DataFormatError(path, f"turn {qid}: {key!r} must be a list, found {excerpt(value)}")
    by_id = {statement.id: statement for statement in ptkb}
    by_text = {statement.text: statement.id for statement in ptkb}
    ids = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool) and str(item) in by_id:
            ids.append(str(item))
        elif isinstance(item, str) and item.strip() in by_id:
            ids.append(item.strip())
        elif isinstance(item, str) and item.strip() in by_text:
            ids.append(by_text[item.strip()])
        else:
            raise DataFormatError(
                path, f"turn {qid}: {key!r} names {excerpt(item)}, not a statement of the 'ptkb'"
            )
    return tuple(dict.fromkeys(ids))
