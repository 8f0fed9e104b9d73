"""TREC RAG 2024 answer files (``--format trec-rag24``): write them from a ``cast run``'s outputs, and check them.

The format is the track's generation output (trec-rag.github.io, "TREC 2024 RAG Track Guidelines", AG and RAG
tasks), checked as the organisers' checker (castorini/ragnarok, ``check_trec_rag24_gen.py``) does, as read when this
module was written: JSON lines, one per topic (here: per turn, its qid as the topic id)::

    {"run_id": "offline", "topic_id": "132_1-3", "topic": "<the utterance>",
     "references": ["<passage id>", ...],                  # the ranking's head, at most 20, no id twice
     "response_length": 42,                                # the answer's words (NFKC, split at white space)
     "answer": [{"text": "<a sentence>", "citations": [0, 2]}, ...]}   # 0-based positions in references

The answer has at most 400 words; one ``run_id`` throughout; every topic answered once. References are MS MARCO
v2.1 segment ids (``msmarco_v2.1_doc_51_766815931#2_1606878413``) in a track submission: the file is written for
any collection (tools that read the format take other ids), and ``cast validate`` reports other ids unless told
``--any-ids``. Check the current guidelines before submitting.

Each answer sentence cites the passage it came from; a generator that does not say (seq2seq) has each sentence cite
the passages the answer was written from. A cited passage below the first 20 of the ranking replaces the lowest of
them. An answer over 400 words loses sentences from its end (as the organisers' checker fixes it).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cast.core.records import Answer
from cast.formats.answers import read_answers
from cast.formats.ikat_runs import coverage_problems
from cast.formats.runfile import ranked, read_run
from cast.formats.textfiles import RUN_JSON_BYTES, json_values
from cast.infra.atomic import write_lines_atomic
from cast.infra.text import sentences as split_sentences

FORMAT = "trec-rag24"
MAX_REFERENCES = 20
MAX_WORDS = 400
FIELDS = ("run_id", "topic_id", "topic", "references", "response_length", "answer")
MSMARCO_SEGMENT_ID = re.compile(r"msmarco_v2\.1_doc_\d+_\d+#\d+_\d+")


def response_words(text: str) -> int:
    """The words of an answer sentence as the track counts them: NFKC-normalised, split at white space.

    Example:
        >>> response_words("Curie won  two Nobel\\u00a0Prizes.")
        5
    """
    return len(unicodedata.normalize("NFKC", text.strip()).split())


def rag24_entry(
    qid: str, topic: str, ranking: Mapping[str, float], answer: Answer, run_id: str
) -> dict[str, Any]:
    """The line of one turn: its ranking's head as references, the answer's sentences citing into them."""
    sentences: list[tuple[str, tuple[str, ...]]] = [
        (s.text, (s.passage_id,) if s.passage_id else ()) for s in answer.sentences
    ]
    if answer.no_answer_reason is not None:  # the abstention cites nothing
        sentences = [(answer.text, ())]
    elif not sentences:
        # A generator that does not attribute: the passages it read stand behind every sentence.
        sentences = [(text, answer.source_ids) for text in split_sentences(answer.text)]
    cited = list(dict.fromkeys(p for _, passages in sentences for p in passages))
    references = [passage_id for passage_id, _ in ranked(ranking.items())][:MAX_REFERENCES]
    missing = [p for p in cited if p not in references]
    if missing:
        references = references[: MAX_REFERENCES - len(missing)] + missing
    position = {passage_id: index for index, passage_id in enumerate(references)}
    lines, words = [], 0
    for text, passages in sentences:
        if words + response_words(text) > MAX_WORDS:
            break
        words += response_words(text)
        lines.append({"text": text, "citations": list(dict.fromkeys(position[p] for p in passages))})
    return {
        "run_id": run_id,
        "topic_id": qid,
        "topic": topic,
        "references": references,
        "response_length": words,
        "answer": lines,
    }


def rag24_run_path(prefix: str | Path) -> Path:
    """Where ``cast run --output PREFIX --format trec-rag24`` writes the file: ``PREFIX.trec-rag24.jsonl``."""
    prefix = Path(prefix)
    return prefix.parent / f"{prefix.name}.{FORMAT}.jsonl"


def write_rag24_run(
    path: str | Path, run_path: str | Path, answers_path: str | Path, run_id: str
) -> list[str]:
    """Write the TREC RAG 2024 file of a finished ``cast run`` (its run file and answers file) atomically, if its
    lines keep the format's rules (any passage ids).

    Returns:
        The problems :func:`validate_rag24_run` finds (e.g. a turn that retrieved nothing); if there are any,
        nothing is written (and a file there before is removed: it would be taken for this run's).
    """
    answers = read_answers(answers_path)
    rankings = read_run(run_path)
    entries = [
        rag24_entry(
            qid, str(answers.records[qid].get("utterance", "")), rankings.get(qid, {}), answer, run_id
        )
        for qid, answer in answers.answers.items()
    ]
    return write_rag24_entries(path, entries)


def write_rag24_entries(path: str | Path, entries: Sequence[dict[str, Any]]) -> list[str]:
    """Write the lines :func:`rag24_entry` made atomically, if they keep the format's rules (any passage ids).

    Returns:
        The problems :func:`validate_rag24_run` finds; if there are any, nothing is written (and a file there
        before is removed: it would be taken for these answers').
    """
    problems = validate_rag24_run(entries, any_ids=True)
    if problems:
        Path(path).unlink(missing_ok=True)
    else:
        write_lines_atomic(path, [json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries])
    return problems


def read_rag24_run(path: str | Path) -> list[Any]:
    """The JSON value of each line of a TREC RAG 2024 file (blank lines skipped).

    Raises:
        DataFormatError: the file is missing, too large, or a line is not (strict) JSON.
    """
    return [value for _, value in json_values(path, file_limit=RUN_JSON_BYTES, what="TREC RAG 2024 file")]


def validate_rag24_run(
    entries: Sequence[Any], topics: Mapping[str, str] | None = None, *, any_ids: bool = False
) -> list[str]:
    """The problems of a TREC RAG 2024 file's lines against the format's rules (empty: valid).

    Args:
        entries: what :func:`read_rag24_run` returns.
        topics: ``{topic id: text}``, if known: every topic answered once, with its own text, and no other.
        any_ids: accept passage ids of any collection, not only MS MARCO v2.1 segment ids.
    """
    problems: list[str] = []
    if not entries:
        return ["the file has no lines"]
    run_ids: set[str] = set()
    answered: list[str] = []
    for number, entry in enumerate(entries, 1):
        where = f"line {number}"
        if not isinstance(entry, dict):
            problems.append(f"{where} is not a JSON object")
            continue
        missing = [name for name in FIELDS if name not in entry]
        unknown = sorted(set(entry) - set(FIELDS))
        if missing or unknown:
            problems.append(
                f"{where}: "
                + "; ".join(
                    ([f"lacks {', '.join(missing)}"] if missing else [])
                    + ([f"has unknown fields {', '.join(unknown)}"] if unknown else [])
                )
            )
            if missing:
                continue
        for name in ("run_id", "topic_id", "topic"):
            if not isinstance(entry[name], str) or not entry[name].strip():
                problems.append(f"{where}: '{name}' must be a non-empty string")
        if isinstance(entry["run_id"], str):
            run_ids.add(entry["run_id"])
        if isinstance(entry["topic_id"], str):
            answered.append(entry["topic_id"])
            where = f"{where} (topic {entry['topic_id']})"
            if (
                topics is not None
                and entry["topic_id"] in topics
                and entry["topic"] != topics[entry["topic_id"]]
            ):
                problems.append(f"{where}: 'topic' is not the topic's text {topics[entry['topic_id']]!r}")
        references = _check_references(entry["references"], where, any_ids, problems)
        words = _check_answer(entry["answer"], len(references), where, problems)
        length = entry["response_length"]
        if not isinstance(length, int) or isinstance(length, bool) or length != words:
            problems.append(f"{where}: 'response_length' is {length!r}, but the answer has {words} words")
        if words > MAX_WORDS:
            problems.append(f"{where}: the answer has {words} words, more than {MAX_WORDS}")
    if len(run_ids) > 1:
        problems.append(
            f"the lines name {len(run_ids)} run ids ({', '.join(sorted(run_ids)[:3])}); one run has one"
        )
    return problems + coverage_problems(answered, topics, "topic ids")


def _check_references(references: Any, where: str, any_ids: bool, problems: list[str]) -> list[str]:
    if not isinstance(references, list) or not all(isinstance(r, str) and r for r in references):
        problems.append(f"{where}: 'references' must be a list of passage ids")
        return []
    if not references:
        problems.append(f"{where}: 'references' is empty (the turn retrieved nothing)")
    if len(references) > MAX_REFERENCES:
        problems.append(f"{where}: {len(references)} references, more than {MAX_REFERENCES}")
    repeated = sorted({r for r in references if references.count(r) > 1})
    if repeated:
        problems.append(f"{where}: references list {repeated[0]!r} more than once")
    if not any_ids:
        other = [r for r in references if not MSMARCO_SEGMENT_ID.fullmatch(r)]
        if other:
            problems.append(
                f"{where}: {len(other)} references are not MS MARCO v2.1 segment ids "
                f"(msmarco_v2.1_doc_51_766815931#2_1606878413), e.g. {other[0]!r}"
            )
    return references


def _check_answer(answer: Any, references: int, where: str, problems: list[str]) -> int:
    """The answer's words; its problems appended."""
    if not isinstance(answer, list) or not answer:
        problems.append(f"{where}: 'answer' must be a non-empty list of sentences")
        return 0
    words = 0
    for index, sentence in enumerate(answer):
        here = f"{where}, answer[{index}]"
        if not isinstance(sentence, dict) or set(sentence) != {"text", "citations"}:
            problems.append(f"{here} must be an object with 'text' and 'citations'")
            continue
        if not isinstance(sentence["text"], str) or not sentence["text"].strip():
            problems.append(f"{here}: 'text' must be a non-empty string")
        else:
            words += response_words(sentence["text"])
        citations = sentence["citations"]
        if not isinstance(citations, list) or not all(_is_position(c) for c in citations):
            problems.append(f"{here}: 'citations' must be a list of positions in 'references' (0, 1, ...)")
            continue
        outside = [c for c in citations if not 0 <= c < references]
        if outside:
            problems.append(f"{here}: citation {outside[0]} is not a position in the {references} references")
        if len(set(citations)) != len(citations):
            problems.append(f"{here}: a reference is cited twice")
    return words


def _is_position(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
