"""Answers files, as `cast run` writes them (:mod:`cast.formats.outputs`): one JSON record a line with the turn's
``qid`` and its ``answer`` (``text``, ``source_ids``, attributed ``sentences``...), read strictly."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cast.core.records import Answer, AnswerSentence
from cast.errors import DataFormatError
from cast.formats.textfiles import json_lines


@dataclass
class AnswersFile:
    """The answers of one system, read from an answers JSONL file.

    Attributes:
        name: the system's name (the file name without ``.answers.jsonl`` / ``.jsonl``).
        answers: the answer of each turn, by qid, in file order.
        records: the full JSON record of each turn (selector settings, timings, ...).
        duplicate_qids: qids met again after their first record (the first is kept).
    """

    path: Path
    name: str
    answers: dict[str, Answer]
    records: dict[str, dict[str, Any]]
    duplicate_qids: list[str] = field(default_factory=list)


def system_name(path: str | Path) -> str:
    """A system's display name from its output file: ``runs/eg-g0.25.answers.jsonl`` -> ``eg-g0.25``."""
    name = Path(path).name
    for suffix in (".answers.jsonl", ".jsonl", ".run", ".trec", ".txt"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def read_answers(path: str | Path) -> AnswersFile:
    """Read an answers file: one JSON object a line with ``qid`` and ``answer`` = ``{"text", "source_ids", ...}``.

    Raises:
        DataFormatError: the file is missing or empty, a line is not JSON, or a field is missing or mistyped
            (the message names the file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "no such answers file")
    answers: dict[str, Answer] = {}
    records: dict[str, dict[str, Any]] = {}
    duplicates: list[str] = []
    for line_number, record in json_lines(path):
        qid, answer = _answer_from_record(path, line_number, record)
        if qid in answers:
            duplicates.append(qid)
            continue
        answers[qid] = answer
        records[qid] = record
    if not answers:
        raise DataFormatError(path, "the answers file has no records")
    return AnswersFile(
        path=path, name=system_name(path), answers=answers, records=records, duplicate_qids=duplicates
    )


def _answer_from_record(path: Path, line_number: int, record: Any) -> tuple[str, Answer]:
    def fail(message: str) -> DataFormatError:
        return DataFormatError(path, message + " (expected the records `cast run` writes)", line_number)

    if not isinstance(record, dict):
        raise fail("a record must be a JSON object")
    qid = record.get("qid")
    if not isinstance(qid, str) or not qid:
        raise fail("missing field 'qid' (a non-empty string)")
    answer = record.get("answer")
    if not isinstance(answer, dict):
        raise fail(f"turn {qid}: missing field 'answer' (an object with 'text' and 'source_ids')")
    text, source_ids = answer.get("text"), answer.get("source_ids")
    if not isinstance(text, str):
        raise fail(f"turn {qid}: missing field 'answer.text' (a string)")
    if not isinstance(source_ids, list) or not all(isinstance(i, str) for i in source_ids):
        raise fail(f"turn {qid}: missing field 'answer.source_ids' (a list of passage ids)")
    attributed = answer.get("sentences") or []
    try:
        answer_sentences = tuple(
            AnswerSentence(text=s["text"], passage_id=s.get("passage_id")) for s in attributed
        )
    except (TypeError, KeyError) as e:
        raise fail(f"turn {qid}: 'answer.sentences' must be objects with 'text'") from e
    return qid, Answer(
        text=text,
        source_ids=tuple(source_ids),
        generator=str(answer.get("generator", "")),
        sentences=answer_sentences,
        settings=answer.get("settings") or {},
        no_answer_reason=answer.get("no_answer_reason"),
    )
