"""Read conversations (TREC CAsT topic files, or a sample conversation of your own) and TREC qrels.

``load_topics`` reads two JSON formats, recognised from their structure (or named with ``fmt``):

``"cast"``: the official TREC CAsT topic files, 2019 to 2022: a list of topics ``{"number": 31, "title"?,
"description"?, "turn": [...]}``. A turn's keys become ``Turn`` fields (keys a year lacks leave them empty):

- ``number`` -> ``turn_id`` (``3``, or ``1-3`` in 2022); the qid is ``<topic number>_<turn number>``.
- ``raw_utterance`` (``utterance`` in 2022) -> ``utterance``.
- ``manual_rewritten_utterance`` -> ``manual_rewrite`` (2020, 2021, 2022 manual files).
- ``automatic_rewritten_utterance`` -> ``automatic_rewrite`` (2020, 2021, 2022 automatic files).
- 2020: ``manual_canonical_result_id``, ``canonical_result_id`` or ``automatic_canonical_result_id`` (one per
  file) -> ``response_ids``.
- 2021: ``passage`` (the canonical passage's text) -> ``response``; ``canonical_result_id`` and ``passage_id``
  -> ``response_ids`` as the passage id ``<document id>-<passage number>``, e.g. ``MARCO_D59865-7``.
- 2022: ``response`` (the organisers' written response) -> ``response``; ``provenance`` (its source passages)
  -> ``response_ids``.

Other keys (e.g. ``query_turn_dependence``) are ignored. The CAsT 2022 files list each path through a topic's
tree as a topic of its own; each path becomes one ``Conversation``, so a turn shared by several paths appears
in each of them under the same qid (e.g. ``132_1-1``); a few such turns (``133_1-5``, ``134_1-1``,
``140_1-1``) have a clarifying question as response in one path and an answer in another. The 2019 topic files
carry no rewrites: pass the resolved-utterance file (``evaluation_topics_annotated_resolved_v1.0.tsv``) as
``rewrites=``.
``2020/automatic_evaluation_topics_annotated_v1.1.json`` (a later, annotated release) has an extra turn in
topic 81 (``81_6``), so its turn numbers 81_6 to 81_9 do not match the 2020 qrels: evaluate with the official
2020 topic files.

``"sample"``: a conversation written by hand, one JSON object or a list of them::

    {
      "topic_id": "demo-1",
      "title": "Throat cancer",
      "turns": [
        {"utterance": "What is throat cancer?"},
        {"utterance": "Is it treatable?", "manual_rewrite": "Is throat cancer treatable?"}
      ]
    }

``title`` and ``description`` are optional. Turns are numbered 1..n in order (qids ``demo-1_1``,
``demo-1_2``). A turn needs ``utterance`` and may have ``manual_rewrite``, ``automatic_rewrite``, ``response``
and ``response_ids`` (a list of passage ids); any other key is an error, so that a misspelt key does not pass
unnoticed.

``"ikat"``: the TREC iKAT 2023-2025 topic files, with each conversation's PTKB; see :mod:`cast.formats.ikat`.

``irds:<id>`` in place of a path reads the conversations (or, for :func:`read_qrels`, the qrels) of an ir_datasets
dataset, e.g. ``irds:trec-cast/v1/2020``; see :mod:`cast.formats.irds`.

``rewrites=`` takes a TSV file of ``qid TAB rewrite`` lines (or a ``{qid: rewrite}`` mapping); its rewrites
become the turns' ``manual_rewrite``, replacing any in the topic file; ``automatic_rewrites=`` does the same
for ``automatic_rewrite``. Rewrites of topics the file does not hold are ignored (so that a topics file cut
to a few conversations takes the year's whole rewrites file), but a qid naming no turn of a topic the file holds
is an error, and so are rewrites that match no turn at all: the rewrites are of another version or year of the
topics. Each CAsT 2022 file carries one kind of rewrite; to have both on the manual file's turns::

    automatic = {t.qid: t.automatic_rewrite for c in load_topics(automatic_file) for t in c.turns}
    conversations = load_topics(manual_file, automatic_rewrites=automatic)

An utterance or rewrite that is empty, or has no letter or digit (punctuation, zero-width or combining marks only),
raises :class:`~cast.errors.EmptyUtteranceError` naming the qid and the file: such a turn cannot be searched, and
dropping it would silently change the evaluation. Qids must be ids a run file can hold
(:func:`~cast.formats.runfile.id_problem`: no whitespace, control or format characters), a sample's ``topic_id`` a
string or a whole number (not ``null``, ``true`` or a list), and a CAsT ``number`` ASCII digits. Any other problem
raises :class:`~cast.errors.DataFormatError` naming the file, and the topic, turn or line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cast.core.records import Conversation, Turn, to_dict
from cast.errors import DataFormatError, EmptyUtteranceError, excerpt
from cast.formats.ikat import is_ikat, read_ikat_topics
from cast.formats.irds import is_irds, read_irds_qrels, read_irds_topics
from cast.formats.runfile import id_problem, split_columns
from cast.formats.textfiles import TABLE_BYTES, TABLE_LINE_BYTES, TOPICS_BYTES, read_json, utf8_lines

FORMATS = ("cast", "sample", "ikat")
# The longest qid (``<topic>_<turn>``; CAsT's and iKAT's have at most 10 characters).
MAX_QID_CHARS = 100
# The largest relevance grade, either sign (TREC's scales run from -2 to 4).
MAX_GRADE = 100
_GRADE = re.compile(r"[-+]?[0-9]{1,9}")

# Topic numbers and turn numbers ("3", or "1-3" for a CAsT 2022 tree path) as they appear in official qids.
_CAST_NUMBER = re.compile(r"[0-9]+(-[0-9]+)?")
# The first of these present gives the canonical result id of a 2020 turn (each file has at most one).
_CANONICAL_ID_KEYS = ("manual_canonical_result_id", "canonical_result_id", "automatic_canonical_result_id")
_SAMPLE_TURN_KEYS = {"utterance", "manual_rewrite", "automatic_rewrite", "response", "response_ids"}


def load_topics(
    path: str | Path,
    *,
    rewrites: str | Path | Mapping[str, str] | None = None,
    automatic_rewrites: str | Path | Mapping[str, str] | None = None,
    fmt: str | None = None,
) -> list[Conversation]:
    """Read the conversations of a topics file.

    Args:
        path: a CAsT topics JSON file (2019-2022) or a sample-conversation JSON file (see the module
            docstring), or ``irds:<id>``: an ir_datasets dataset's conversations (:mod:`cast.formats.irds`).
        rewrites: a ``qid TAB rewrite`` TSV file, or a ``{qid: rewrite}`` mapping, whose rewrites become the
            turns' ``manual_rewrite`` (e.g. 2019's ``evaluation_topics_annotated_resolved_v1.0.tsv``).
        automatic_rewrites: the same, for the turns' ``automatic_rewrite``.
        fmt: ``"cast"``, ``"sample"`` or ``"ikat"``; recognised from the file's structure when not given.

    Returns:
        The conversations in file order (for CAsT 2022, one per path through a topic tree).

    Raises:
        DataFormatError: the file is missing, not JSON, or not in the format; or a rewrite names a qid of one
            of the topics that is not a turn of it, or no rewrite names a turn.
        EmptyUtteranceError: a turn's utterance or rewrite is empty.

    Example:
        >>> conversations = load_topics(  # doctest: +SKIP
        ...     "evaluation_topics_v1.0.json", rewrites="evaluation_topics_annotated_resolved_v1.0.tsv"
        ... )
        >>> conversations[0].turns[1].manual_rewrite  # doctest: +SKIP
        'Is throat cancer treatable?'
    """
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown topics format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if is_irds(path):
        conversations = read_irds_topics(str(path))
    else:
        data = read_json(path, TOPICS_BYTES, "topics file")
        fmt = fmt or _detect_format(path, data)
        readers = {"cast": _read_cast, "sample": _read_sample, "ikat": read_ikat_topics}
        conversations = readers[fmt](path, data)
    for field_name, given in (("manual_rewrite", rewrites), ("automatic_rewrite", automatic_rewrites)):
        if given is not None:
            conversations = _with_rewrites(conversations, given, field_name)
    for conversation in conversations:
        for turn in conversation.turns:
            _check_qid(path, turn.qid)
            _check_not_empty(path, turn)
    return conversations


def topics_digest(conversations: Sequence[Conversation]) -> str:
    """A digest of the conversations as read (rewrites and PTKB included; a file only laid out otherwise gives the
    same), which outputs made from them record, so that a resume or a sweep with other topics is refused."""
    canonical = json.dumps([to_dict(c) for c in conversations], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def read_rewrites(path: str | Path) -> dict[str, str]:
    """Read a ``qid TAB rewrite`` TSV file (e.g. CAsT 2019's resolved utterances) into ``{qid: rewrite}``.

    Raises:
        DataFormatError: the file is missing, a line has no tab, or a qid appears twice.
        EmptyUtteranceError: a rewrite is empty.
    """
    rewrites: dict[str, str] = {}
    for line_number, line in _read_lines(path):
        qid, tab, text = line.partition("\t")
        if not tab:
            raise DataFormatError(
                path, f"expected 'qid<TAB>rewrite', found no tab in {excerpt(line)}", line_number
            )
        qid = qid.strip()
        if not qid:
            raise DataFormatError(path, "the qid before the tab is empty", line_number)
        if qid in rewrites:
            raise DataFormatError(path, f"qid {qid} appears a second time", line_number)
        if not text.strip():
            raise EmptyUtteranceError(
                f"{path}:{line_number}: the rewrite of turn {qid} is empty; write its text"
            )
        rewrites[qid] = text.strip()
    return rewrites


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels (``qid iteration docid relevance`` a line, separated by ASCII whitespace) as ``{qid: {docid:
    relevance}}``.

    Blank lines are skipped. A (qid, docid) pair judged twice keeps its last grade, as trec_eval does. A grade is
    an integer in ASCII digits from -:data:`MAX_GRADE` to :data:`MAX_GRADE` (Python's ``int`` also reads ``1_0``
    as 10 and ``٣`` as 3, and pytrec_eval fails on one beyond C's ``int``); qids and docids are ids a run file can
    hold (:func:`~cast.formats.runfile.id_problem`). ``irds:<id>`` reads the qrels of an ir_datasets dataset
    (:mod:`cast.formats.irds`).

    Raises:
        DataFormatError: the file is missing or empty, or a line has not four fields, an id or a grade as above.
    """
    if is_irds(path):
        return read_irds_qrels(str(path))
    qrels: dict[str, dict[str, int]] = {}
    for line_number, line in _read_lines(path):
        parts = split_columns(line)
        if len(parts) != 4:
            raise DataFormatError(
                path,
                f"expected 'qid 0 docid relevance', found {len(parts)} fields in {excerpt(line)}",
                line_number,
            )
        qid, _, docid, relevance = parts
        for name, value in (("qid", qid), ("docid", docid)):
            problem = id_problem(value)
            if problem is not None:
                raise DataFormatError(path, f"{name} {excerpt(value)} {problem}", line_number)
        if not _GRADE.fullmatch(relevance) or abs(int(relevance)) > MAX_GRADE:
            raise DataFormatError(
                path,
                f"relevance {excerpt(relevance)} is not a grade: an integer from {-MAX_GRADE} to {MAX_GRADE} in "
                "ASCII digits",
                line_number,
            )
        qrels.setdefault(qid, {})[docid] = int(relevance)
    if not qrels:
        raise DataFormatError(path, "the qrels file is empty")
    return qrels


def _read_lines(path: str | Path) -> list[tuple[int, str]]:
    """The non-blank lines of a text file (qrels, rewrites) with their 1-based numbers, line ends removed."""
    lines = utf8_lines(path, TABLE_LINE_BYTES, file_limit=TABLE_BYTES, what="qrels or rewrites file")
    return [(number, line.rstrip("\r\n")) for number, line in lines if line.strip()]


def _detect_format(path: str | Path, data: Any) -> str:
    if is_ikat(data):
        return "ikat"
    items = data if isinstance(data, list) else [data]
    if items and all(isinstance(item, dict) and "turn" in item for item in items):
        return "cast"
    if items and all(isinstance(item, dict) and "turns" in item for item in items):
        return "sample"
    raise DataFormatError(
        path,
        "not a topics file: expected a CAsT topics list ([{'number': ..., 'turn': [...]}, ...]) or a sample "
        "conversation ({'topic_id': ..., 'turns': [{'utterance': ...}, ...]})",
    )


def _read_cast(path: str | Path, data: Any) -> list[Conversation]:
    if not isinstance(data, list):
        raise DataFormatError(path, "a CAsT topics file is a JSON list of topics")
    conversations = []
    first_place: dict[str, tuple[str, str]] = {}  # qid -> (where it first appears, its utterance)
    for index, topic in enumerate(data):
        where = f"topic #{index + 1}"
        if not isinstance(topic, dict) or not isinstance(topic.get("turn"), list) or not topic["turn"]:
            raise DataFormatError(path, f"{where} has no 'turn' list, or an empty one")
        topic_id = _cast_number(path, topic, where)
        turns = tuple(
            _cast_turn(path, topic_id, turn, f"topic {topic_id}, turn #{position + 1}")
            for position, turn in enumerate(topic["turn"])
        )
        _check_unique_turns(path, turns, f"topic {topic_id}")
        _check_same_utterance(path, turns, f"topic #{index + 1}", first_place)
        conversations.append(
            Conversation(topic_id, turns, title=topic.get("title"), description=topic.get("description"))
        )
    return conversations


def _cast_turn(path: str | Path, topic_id: str, turn: Any, where: str) -> Turn:
    if not isinstance(turn, dict):
        raise DataFormatError(path, f"{where} is not a JSON object")
    turn_id = _cast_number(path, turn, where)
    qid = f"{topic_id}_{turn_id}"
    utterance_keys = [key for key in ("raw_utterance", "utterance") if key in turn]
    if len(utterance_keys) != 1:
        raise DataFormatError(path, f"turn {qid} needs exactly one of 'raw_utterance' or 'utterance'")
    return Turn(
        qid=qid,
        topic_id=topic_id,
        turn_id=turn_id,
        utterance=_required_string(path, turn, utterance_keys[0], qid),
        manual_rewrite=_string(path, turn, "manual_rewritten_utterance", qid),
        automatic_rewrite=_string(path, turn, "automatic_rewritten_utterance", qid),
        response=_string(path, turn, "response", qid) or _string(path, turn, "passage", qid),
        response_ids=_cast_response_ids(path, turn, qid),
    )


def _cast_response_ids(path: str | Path, turn: dict, qid: str) -> tuple[str, ...]:
    """2022 provenance, 2021 canonical passage (``<document id>-<passage number>``), 2020 canonical result."""
    if "provenance" in turn:
        return _string_list(path, turn["provenance"], f"turn {qid}'s 'provenance'")
    if "passage_id" in turn and "canonical_result_id" in turn:
        return (f"{turn['canonical_result_id']}-{turn['passage_id']}",)
    return tuple(str(turn[key]) for key in _CANONICAL_ID_KEYS if key in turn)[:1]


def _cast_number(path: str | Path, item: dict, where: str) -> str:
    """A topic's or turn's ``number`` as the string used in qids: ``31``, or ``1-3`` in CAsT 2022."""
    if "number" not in item:
        raise DataFormatError(path, f"{where} has no 'number'")
    number = item["number"]
    text = str(number) if not isinstance(number, bool) else ""
    if not _CAST_NUMBER.fullmatch(text):
        raise DataFormatError(path, f"{where} has 'number' {excerpt(number)}; expected e.g. 3 or '1-3'")
    return text


def _read_sample(path: str | Path, data: Any) -> list[Conversation]:
    conversations: list[Conversation] = []
    for index, item in enumerate(data if isinstance(data, list) else [data]):
        where = f"conversation #{index + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("turns"), list) or not item["turns"]:
            raise DataFormatError(path, f"{where} has no 'turns' list, or an empty one")
        given = item.get("topic_id")
        # A string, or a whole number as CAsT's and iKAT's topic numbers are (not null, true or a list).
        topic_id = str(given).strip() if isinstance(given, str | int) and not isinstance(given, bool) else ""
        if not topic_id or any(character.isspace() for character in topic_id):
            raise DataFormatError(
                path,
                f"{where} needs a 'topic_id' without spaces (it starts each qid): a string or a number, found {excerpt(given)}",
            )
        if topic_id in {conversation.topic_id for conversation in conversations}:
            raise DataFormatError(path, f"{where} repeats topic_id {topic_id!r}")
        turns = tuple(
            _sample_turn(path, topic_id, str(position), turn)
            for position, turn in enumerate(item["turns"], start=1)
        )
        conversations.append(
            Conversation(topic_id, turns, title=item.get("title"), description=item.get("description"))
        )
    return conversations


def _sample_turn(path: str | Path, topic_id: str, turn_id: str, turn: Any) -> Turn:
    qid = f"{topic_id}_{turn_id}"
    if not isinstance(turn, dict) or "utterance" not in turn:
        raise DataFormatError(path, f"turn {qid} needs an 'utterance'")
    unknown = sorted(set(turn) - _SAMPLE_TURN_KEYS)
    if unknown:
        raise DataFormatError(
            path, f"turn {qid} has unknown keys {unknown}; allowed: {', '.join(sorted(_SAMPLE_TURN_KEYS))}"
        )
    return Turn(
        qid=qid,
        topic_id=topic_id,
        turn_id=turn_id,
        utterance=_required_string(path, turn, "utterance", qid),
        manual_rewrite=_string(path, turn, "manual_rewrite", qid),
        automatic_rewrite=_string(path, turn, "automatic_rewrite", qid),
        response=_string(path, turn, "response", qid),
        response_ids=_string_list(path, turn.get("response_ids", []), f"turn {qid}'s 'response_ids'"),
    )


def _string(path: str | Path, item: dict, key: str, qid: str) -> str | None:
    """``item[key]`` if present (it must be a string), else None."""
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise DataFormatError(path, f"turn {qid}'s {key!r} is {type(value).__name__}, expected a string")
    return value


def _required_string(path: str | Path, item: dict, key: str, qid: str) -> str:
    """``item[key]``, which must be a string (not null)."""
    value = _string(path, item, key, qid)
    if value is None:
        raise DataFormatError(path, f"turn {qid}: {key!r} is null; expected a string")
    return value


def _string_list(path: str | Path, value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DataFormatError(path, f"{what} must be a list of passage ids (strings), found {excerpt(value)}")
    return tuple(value)


def _check_unique_turns(path: str | Path, turns: tuple[Turn, ...], where: str) -> None:
    qids = [turn.qid for turn in turns]
    repeated = sorted({qid for qid in qids if qids.count(qid) > 1})
    if repeated:
        raise DataFormatError(path, f"{where} lists turns {repeated} more than once")


def _check_same_utterance(
    path: str | Path, turns: tuple[Turn, ...], where: str, first_place: dict[str, tuple[str, str]]
) -> None:
    """A qid in two topics must be the same turn (CAsT 2022 paths share turns); with another utterance, one of the
    two would never be answered, since the pipeline answers each qid once."""
    for turn in turns:
        place = f"{where}, turn {turn.turn_id}"
        earlier = first_place.setdefault(turn.qid, (place, turn.utterance))
        if earlier[1] != turn.utterance:
            raise DataFormatError(
                path,
                f"qid {turn.qid} is used for two different questions: {excerpt(earlier[1], 60)} ({earlier[0]}) "
                f"and {excerpt(turn.utterance, 60)} ({place}); give the topics distinct numbers",
            )


def _check_qid(path: str | Path, qid: str) -> None:
    """A qid is a column of every run file: an id a run file can hold (:func:`~cast.formats.runfile.id_problem`),
    and short (a run file repeats it a thousand times a turn)."""
    problem = id_problem(qid) or (
        f"is longer than {MAX_QID_CHARS} characters" if len(qid) > MAX_QID_CHARS else None
    )
    if problem is not None:
        raise DataFormatError(
            path, f"qid {excerpt(qid)} {problem}; change the topic's id (or number) and the turn's"
        )


def _check_not_empty(path: str | Path, turn: Turn) -> None:
    texts = (
        ("utterance", turn.utterance),
        ("manual rewrite", turn.manual_rewrite),
        ("automatic rewrite", turn.automatic_rewrite),
    )
    for what, text in texts:
        if text is not None and not text.strip():
            raise EmptyUtteranceError(
                f"{path}: turn {turn.qid} has an empty {what}; write its text in the file (a turn without "
                f"text cannot be searched)"
            )
        if text is not None and not any(character.isalnum() for character in text):
            raise EmptyUtteranceError(
                f"{path}: turn {turn.qid}'s {what} {excerpt(text, 40)} has no letter or digit, so nothing to search; "
                "write its text in the file"
            )


def _with_rewrites(
    conversations: list[Conversation], rewrites: str | Path | Mapping[str, str], field_name: str
) -> list[Conversation]:
    """The conversations with ``field_name`` (a rewrite field of ``Turn``) set from ``rewrites`` by qid."""
    source = "the rewrites given"
    if not isinstance(rewrites, Mapping):
        source = str(rewrites)
        rewrites = read_rewrites(rewrites)
    known = {turn.qid for conversation in conversations for turn in conversation.turns}
    topic_ids = {conversation.topic_id for conversation in conversations}
    # A qid is `<topic id>_<turn number>`, and turn numbers have no underscore.
    unknown = sorted(qid for qid in set(rewrites) - known if qid.rpartition("_")[0] in topic_ids)
    if unknown:
        raise DataFormatError(
            source,
            f"{len(unknown)} rewrites name qids that are not turns of these topics, e.g. {unknown[:3]}",
        )
    if rewrites and not known & set(rewrites):
        raise DataFormatError(
            source,
            f"none of its {len(rewrites)} rewrites names a turn of these topics (it has e.g. "
            f"{sorted(rewrites)[:3]}; the topics e.g. {sorted(known)[:3]}): are they of the same year?",
        )
    return [
        replace(
            conversation,
            turns=tuple(
                replace(turn, **{field_name: rewrites[turn.qid]}) if turn.qid in rewrites else turn  # type: ignore[arg-type]
                for turn in conversation.turns
            ),
        )
        for conversation in conversations
    ]


def provenance_qrels(conversations: Sequence[Conversation]) -> dict[str, dict[str, int]]:
    """Each turn's ``response_ids`` (its response's provenance passages) as its relevant passages (grade 1)."""
    return {
        t.qid: {passage_id: 1 for passage_id in t.response_ids}
        for c in conversations
        for t in c.turns
        if t.response_ids
    }
