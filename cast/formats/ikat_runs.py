"""TREC iKAT run files (2023, 2024, 2025): write them from a ``cast run``'s outputs, and check them.

The schemas follow the organisers' validators and sample runs in github.com/irlabamsterdam/iKAT (the
protocol buffers ``2023/.../run.proto`` and ``2024/.../run.proto``, ``2025/scripts/validate_trec_ikat25.py``),
as read when this module was written; check the current guidelines before submitting.

``ikat2023``: one JSON object ``{"run_name", "run_type": "automatic" | "manual", "turns": [{"turn_id",
"responses": [{"rank", "text", "passage_provenance": [{"id", "text"?, "score", "used"}],
"ptkb_provenance": [{"id", "text", "score"}]}]}]}``.

``ikat2024``: the same, with ``"eval_response": true`` on the run, ``run_type`` also ``only_response``, and
``ptkb_provenance`` a list of statement ids (ints).

``ikat2025``: JSON lines, one per turn: ``{"metadata": {"team_id", "run_id", "run_type": "automatic" | "manual" |
"generation-only"}, "turn_id", "references": {passage id: score} (at most 1000), "responses": [{"text",
"citations": {passage id: score}, "ptkb_provenance": [statement ids]}]}``; the responses together have at most
250 words, and every citation is one of the references.

In every year, the passage provenance is the turn's ranking (at most 1000 passages, scores non-increasing) and
the passages the answer was written from are ``used`` (2023-2024) or cited (2025); the PTKB provenance is the
statements the ``ptkb`` stage chose, with their scores (2023) or as ids. Passage ids are ClueWeb22 passage ids
(``clueweb22-en0034-09-03452:1``); ids of other collections are reported as problems.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from cast.core.records import PTKBSelection, from_dict
from cast.errors import CastError
from cast.formats.answers import read_answers
from cast.formats.runfile import read_run
from cast.formats.textfiles import RUN_JSON_BYTES, json_values, read_json
from cast.infra.atomic import write_lines_atomic

RUN_FORMATS = ("ikat2023", "ikat2024", "ikat2025")
RUN_TYPES = {
    "ikat2023": ("automatic", "manual"),
    "ikat2024": ("automatic", "manual", "only_response"),
    "ikat2025": ("automatic", "manual", "generation-only"),
}
MAX_PASSAGES = 1000
MAX_RESPONSE_WORDS_2025 = 250
_DIGITS = re.compile(r"[0-9]+")  # str.isdigit() takes other scripts' digits too ("٣")
CLUEWEB_PASSAGE_ID = re.compile(r"clueweb22-en\d{4}-\d{2}-\d{5}:\d+")


@dataclass(frozen=True)
class TurnOutput:
    """What an iKAT run file says about one turn.

    Attributes:
        qid: the turn id (``9-1_3``).
        ranking: passage ids with their scores, best first.
        response: the answer text.
        used: the ids of the passages the answer was written from.
        passage_texts: the texts of passages the outputs hold (the used ones), by id.
        ptkb: the chosen PTKB statements as ``(id, text, score)``, best first.
    """

    qid: str
    ranking: tuple[tuple[str, float], ...]
    response: str
    used: tuple[str, ...]
    passage_texts: Mapping[str, str]
    ptkb: tuple[tuple[str, str, float], ...]


def turn_outputs(
    rankings: Mapping[str, Mapping[str, float]], records: Iterable[Mapping[str, Any]]
) -> list[TurnOutput]:
    """The turns of a run (``{qid: {passage id: score}}``, from its TREC file) and its answers-file records."""
    outputs = []
    for record in records:
        qid = str(record["qid"])
        ranking = sorted(rankings.get(qid, {}).items(), key=lambda item: (-item[1], item[0]))
        answer = record.get("answer") or {}
        selected = (record.get("selection") or {}).get("passages", [])
        texts = {p["passage"]["id"]: p["passage"]["text"] for p in selected}
        ptkb = record.get("ptkb_provenance")
        outputs.append(
            TurnOutput(
                qid=qid,
                ranking=tuple(ranking[:MAX_PASSAGES]),
                response=answer.get("text", ""),
                used=tuple(answer.get("source_ids", ())),
                passage_texts=texts,
                ptkb=ptkb_provenance(from_dict(PTKBSelection, ptkb) if ptkb else None),
            )
        )
    return outputs


def ptkb_provenance(selection: PTKBSelection | None) -> tuple[tuple[str, str, float], ...]:
    """A turn's PTKB provenance (:attr:`TurnOutput.ptkb`): the statements the ``ptkb`` stage chose, best first, as
    ``(id, text, score)``; none where no statement was scored (no PTKB, or no selector), as the answers file
    records it (:meth:`cast.core.records.TurnResult.to_record`)."""
    if selection is None or not selection.scores:
        return ()
    return tuple((s.id, s.text, float(selection.scores.get(s.id, 0.0))) for s in selection.statements)


def ikat_run(
    turns: Sequence[TurnOutput], fmt: str, run_name: str, run_type: str, team_id: str = ""
) -> list[str]:
    """The run file's lines (one JSON object for 2023-2024, one per turn for 2025).

    Raises:
        CastError: an unknown format or run type.
    """
    if fmt not in RUN_FORMATS:
        raise CastError(f"unknown iKAT run format {fmt!r}; choose one of {', '.join(RUN_FORMATS)}")
    if run_type not in RUN_TYPES[fmt]:
        raise CastError(f"{fmt} run type must be one of {', '.join(RUN_TYPES[fmt])}, got {run_type!r}")
    if fmt == "ikat2025":
        return [json.dumps(_entry_2025(turn, run_name, run_type, team_id)) + "\n" for turn in turns]
    run: dict[str, Any] = {"run_name": run_name, "run_type": run_type}
    if fmt == "ikat2024":
        run["eval_response"] = True
    run["turns"] = [{"turn_id": turn.qid, "responses": [_response_2023_2024(turn, fmt)]} for turn in turns]
    return [json.dumps(run) + "\n"]


def _response_2023_2024(turn: TurnOutput, fmt: str) -> dict[str, Any]:
    used = set(turn.used)
    provenance = []
    for passage_id, score in _with_used(turn):
        item: dict[str, Any] = {"id": passage_id, "score": score, "used": passage_id in used}
        if fmt == "ikat2023" and passage_id in turn.passage_texts:
            item["text"] = turn.passage_texts[passage_id]
        provenance.append(item)
    if fmt == "ikat2023":
        ptkb: list[Any] = [{"id": i, "text": text, "score": score} for i, text, score in turn.ptkb]
    else:
        ptkb = [int(i) for i, _, _ in turn.ptkb]
    return {"rank": 1, "text": turn.response, "passage_provenance": provenance, "ptkb_provenance": ptkb}


def _with_used(turn: TurnOutput) -> list[tuple[str, float]]:
    """The ranking, with the used passages it lacks (a cut ranking) added below it, scores non-increasing."""
    ranking = list(turn.ranking)
    listed = {passage_id for passage_id, _ in ranking}
    missing = [passage_id for passage_id in turn.used if passage_id not in listed]
    if missing:
        lowest = ranking[-1][1] if ranking else 0.0
        ranking = ranking[: MAX_PASSAGES - len(missing)] + [(p, lowest) for p in missing]
    return ranking


def _entry_2025(turn: TurnOutput, run_name: str, run_type: str, team_id: str) -> dict[str, Any]:
    references = dict(_with_used(turn))
    words = unicodedata.normalize("NFKC", turn.response).split()
    return {
        "metadata": {"team_id": team_id, "run_id": run_name, "run_type": run_type},
        "turn_id": turn.qid,
        "references": references,
        "responses": [
            {
                "text": " ".join(words[:MAX_RESPONSE_WORDS_2025]),
                "citations": {passage_id: references[passage_id] for passage_id in turn.used},
                "ptkb_provenance": [int(i) for i, _, _ in turn.ptkb],
            }
        ],
    }


def ikat_run_path(prefix: str | Path, fmt: str) -> Path:
    """Where ``cast run --output PREFIX --format FMT`` writes the iKAT run: ``PREFIX.ikat2024.json``..."""
    prefix = Path(prefix)
    return prefix.parent / f"{prefix.name}.{fmt}.{'jsonl' if fmt == 'ikat2025' else 'json'}"


def write_ikat_run(
    path: str | Path,
    run_path: str | Path,
    answers_path: str | Path,
    fmt: str,
    run_name: str,
    run_type: str = "automatic",
    team_id: str = "",
) -> list[str]:
    """Write the iKAT run of a finished ``cast run`` (its TREC run file and answers file) atomically, if it is
    valid.

    Returns:
        The problems :func:`validate_ikat_run` finds in it (e.g. a turn that retrieved no passage); if there are
        any, nothing is written (and a file there before is removed: it would be taken for this run's).
    """

    records = read_answers(answers_path).records.values()
    return write_ikat_lines(
        path, ikat_run(turn_outputs(read_run(run_path), records), fmt, run_name, run_type, team_id), fmt
    )


def write_ikat_lines(path: str | Path, lines: Sequence[str], fmt: str) -> list[str]:
    """Write the lines :func:`ikat_run` made atomically, if they are a valid ``fmt`` run.

    Returns:
        The problems :func:`validate_ikat_run` finds; if there are any, nothing is written (and a file there
        before is removed: it would be taken for this run's).
    """
    parsed = [json.loads(line) for line in lines]
    problems = validate_ikat_run(parsed if fmt == "ikat2025" else parsed[0], fmt)
    if problems:
        Path(path).unlink(missing_ok=True)
    else:
        write_lines_atomic(path, lines)
    return problems


def read_ikat_run(path: str | Path, fmt: str) -> Any:
    """A run file's JSON (2023-2024: the object; 2025: the list of line objects).

    Raises:
        DataFormatError: the file is missing, too large, or not (strict) JSON.
    """

    if fmt == "ikat2025":
        return [value for _, value in json_values(path, file_limit=RUN_JSON_BYTES, what="iKAT run file")]
    return read_json(path, RUN_JSON_BYTES, "iKAT run file")


def validate_ikat_run(run: Any, fmt: str, qids: Sequence[str] | None = None) -> list[str]:
    """The problems of a parsed run against ``fmt``'s schema and rules (empty: the run is valid).

    Args:
        run: what :func:`read_ikat_run` returns.
        fmt: one of :data:`RUN_FORMATS`.
        qids: the topics' turn ids, if known: every one must be answered once, and no other.
    """
    if fmt not in RUN_FORMATS:
        raise CastError(f"unknown iKAT run format {fmt!r}; choose one of {', '.join(RUN_FORMATS)}")
    problems: list[str] = []
    if fmt == "ikat2025":
        turn_ids = _validate_2025(run, problems)
    else:
        turn_ids = _validate_2023_2024(run, fmt, problems)
    return problems + coverage_problems(turn_ids, qids)


def coverage_problems(
    answered: Sequence[str], expected: Iterable[str] | None, what: str = "turns"
) -> list[str]:
    """The problems of which ``what`` (turns, topics) a run answers: one answered twice, and with ``expected`` (the
    topics' ids, if known) one of them missing or one answered that is not among them."""
    problems = []
    repeated = sorted({qid for qid in answered if answered.count(qid) > 1})
    if repeated:
        problems.append(f"{what} answered more than once: {repeated[:5]}")
    if expected is not None:
        expected = list(expected)
        missing = [qid for qid in expected if qid not in set(answered)]
        extra = sorted(set(answered) - set(expected))
        if missing:
            problems.append(f"{len(missing)} {what} of the topics are missing, e.g. {missing[:3]}")
        if extra:
            problems.append(f"{len(extra)} {what} are not in the topics, e.g. {extra[:3]}")
    return problems


def _validate_2023_2024(run: Any, fmt: str, problems: list[str]) -> list[str]:
    if not isinstance(run, dict):
        problems.append("the run is not a JSON object")
        return []
    allowed = {"run_name", "run_type", "turns"} | ({"eval_response"} if fmt == "ikat2024" else set())
    _unknown_keys(run, allowed, "the run", problems)
    if not isinstance(run.get("run_name"), str) or not run["run_name"]:
        problems.append("'run_name' is missing or empty")
    if run.get("run_type") not in RUN_TYPES[fmt]:
        problems.append(f"'run_type' is {run.get('run_type')!r}; expected one of {', '.join(RUN_TYPES[fmt])}")
    turns = run.get("turns")
    if not isinstance(turns, list) or not turns:
        problems.append("'turns' is missing or empty")
        return []
    turn_ids = []
    for index, turn in enumerate(turns):
        where = f"turns[{index}]"
        if not isinstance(turn, dict) or not isinstance(turn.get("turn_id"), str):
            problems.append(f"{where} has no string 'turn_id'")
            continue
        _unknown_keys(turn, {"turn_id", "responses"}, where, problems)
        where = f"turn {turn['turn_id']}"
        turn_ids.append(turn["turn_id"])
        _check_turn_id(turn["turn_id"], where, problems)
        previous_rank = 0
        for here, response in _responses(
            turn, where, {"rank", "text", "passage_provenance", "ptkb_provenance"}, problems
        ):
            rank = response.get("rank")
            if not isinstance(rank, int) or isinstance(rank, bool) or rank <= previous_rank:
                problems.append(f"{here}: 'rank' {rank!r} must be an integer above the previous response's")
            else:
                previous_rank = rank
            if not isinstance(response.get("text"), str) or not response["text"].strip():
                problems.append(f"{here}: 'text' is missing or empty")
            _check_passage_provenance(response.get("passage_provenance"), fmt, here, problems)
            _check_ptkb_provenance(response.get("ptkb_provenance"), fmt, here, problems)
    return turn_ids


def _check_passage_provenance(provenance: Any, fmt: str, where: str, problems: list[str]) -> None:
    if not isinstance(provenance, list) or not provenance:
        problems.append(f"{where}: 'passage_provenance' is missing or empty")
        return
    if len(provenance) > MAX_PASSAGES:
        problems.append(
            f"{where}: {len(provenance)} passages in 'passage_provenance', more than {MAX_PASSAGES}"
        )
    previous = float("inf")
    _check_passage_ids(
        [item.get("id") if isinstance(item, dict) else None for item in provenance], where, problems
    )
    for here, item in _objects(
        provenance, f"{where}, passage_provenance[{{}}]", {"id", "text", "score", "used"}, problems
    ):
        score = item.get("score")
        if not _is_number(score):
            problems.append(f"{here}: 'score' {score!r} is not a number")
        elif score > previous:
            problems.append(f"{here}: scores must not increase down the list")
        else:
            previous = score
        if "used" in item and not isinstance(item["used"], bool):
            problems.append(f"{here}: 'used' must be true or false")
        if "text" in item and not isinstance(item["text"], str):
            problems.append(f"{here}: 'text' must be a string")
    if fmt == "ikat2024" and not any(isinstance(i, dict) and i.get("used") is True for i in provenance):
        problems.append(f"{where}: no passage is marked 'used'")


def _check_ptkb_provenance(provenance: Any, fmt: str, where: str, problems: list[str]) -> None:
    if provenance is None:
        return
    if not isinstance(provenance, list):
        problems.append(f"{where}: 'ptkb_provenance' must be a list")
        return
    if fmt != "ikat2023":
        if not all(_is_statement_id(i) for i in provenance):
            problems.append(
                f"{where}: 'ptkb_provenance' must list statement ids (integers), got {provenance!r}"
            )
        return
    previous = float("inf")
    for here, item in _objects(
        provenance, f"{where}, ptkb_provenance[{{}}]", {"id", "text", "score"}, problems
    ):
        if not _is_statement_id(item.get("id")):
            problems.append(f"{here}: 'id' {item.get('id')!r} is not a statement id")
        if not isinstance(item.get("text"), str):
            problems.append(f"{here}: 'text' must be a string")
        score = item.get("score")
        if not _is_number(score) or score > previous:
            problems.append(f"{here}: 'score' {score!r} must be a number, not above the previous statement's")
        else:
            previous = score


def _validate_2025(lines: Any, problems: list[str]) -> list[str]:
    if not isinstance(lines, list) or not lines:
        problems.append("the run has no lines")
        return []
    turn_ids = []
    keys = {"metadata", "turn_id", "references", "responses"}
    for where, entry in _objects(lines, "line {}", keys, problems, start=1):
        turn_id = entry.get("turn_id")
        if not isinstance(turn_id, str):
            problems.append(f"{where}: 'turn_id' is missing or not a string")
        else:
            turn_ids.append(turn_id)
            _check_turn_id(turn_id, where, problems)
            where = f"{where} (turn {turn_id})"
        metadata = entry.get("metadata")
        if not isinstance(metadata, dict):
            problems.append(f"{where}: 'metadata' must be an object")
        else:
            missing = sorted({"team_id", "run_id", "run_type"} - set(metadata))
            if missing:
                problems.append(f"{where}: 'metadata' lacks {missing}")
            if "run_type" in metadata and metadata["run_type"] not in RUN_TYPES["ikat2025"]:
                problems.append(
                    f"{where}: metadata 'run_type' {metadata['run_type']!r} is not one of "
                    f"{', '.join(RUN_TYPES['ikat2025'])}"
                )
        references = entry.get("references")
        if not isinstance(references, dict) or not all(_is_number(s) for s in references.values()):
            problems.append(f"{where}: 'references' must be an object {{passage id: score}}")
            references = {}
        if len(references) > MAX_PASSAGES:
            problems.append(f"{where}: {len(references)} references, more than {MAX_PASSAGES}")
        _check_passage_ids(list(references), where, problems)
        words = 0
        for here, response in _responses(entry, where, {"text", "citations", "ptkb_provenance"}, problems):
            if not isinstance(response.get("text"), str):
                problems.append(f"{here}: 'text' is missing or not a string")
                continue
            words += len(unicodedata.normalize("NFKC", response["text"]).split())
            citations = response.get("citations")
            if not isinstance(citations, dict):
                problems.append(f"{here}: 'citations' must be an object {{passage id: score}}")
            else:
                unknown = [c for c in citations if c not in references]
                if unknown:
                    problems.append(f"{here}: citations not among the references: {unknown[:3]}")
            if "ptkb_provenance" not in response:
                problems.append(f"{here}: 'ptkb_provenance' is missing")
            else:
                _check_ptkb_provenance(response["ptkb_provenance"], "ikat2025", here, problems)
        if words > MAX_RESPONSE_WORDS_2025:
            problems.append(f"{where}: the responses have {words} words, more than {MAX_RESPONSE_WORDS_2025}")
    return turn_ids


def _responses(item: dict, where: str, allowed: set[str], problems: list[str]) -> list[tuple[str, dict]]:
    """Each response object of a turn with where it is; a missing list is a problem."""
    responses = item.get("responses")
    if not isinstance(responses, list) or not responses:
        problems.append(f"{where}: 'responses' is missing or empty")
        return []
    return _objects(responses, f"{where}, responses[{{}}]", allowed, problems)


def _objects(
    items: Sequence[Any], where: str, allowed: set[str], problems: list[str], start: int = 0
) -> list[tuple[str, dict]]:
    """The JSON objects of ``items`` with where each is (``where`` formatted with its position), their unknown
    fields reported; an item that is not an object is a problem."""
    found = []
    for position, item in enumerate(items, start=start):
        here = where.format(position)
        if not isinstance(item, dict):
            problems.append(f"{here} is not a JSON object")
            continue
        _unknown_keys(item, allowed, here, problems)
        found.append((here, item))
    return found


def _unknown_keys(item: dict, allowed: set[str], where: str, problems: list[str]) -> None:
    unknown = sorted(set(item) - allowed)
    if unknown:
        problems.append(f"{where} has unknown fields {unknown}; allowed: {', '.join(sorted(allowed))}")


def _check_turn_id(turn_id: str, where: str, problems: list[str]) -> None:
    topic, underscore, turn = turn_id.rpartition("_")
    if not underscore or not topic or not _DIGITS.fullmatch(turn) or any(c.isspace() for c in turn_id):
        problems.append(f"{where}: turn id {turn_id!r} is not '<topic>_<turn number>'")


def _check_passage_ids(passage_ids: Sequence[Any], where: str, problems: list[str]) -> None:
    wrong = [p for p in passage_ids if not isinstance(p, str) or not CLUEWEB_PASSAGE_ID.fullmatch(p)]
    if wrong:
        problems.append(
            f"{where}: {len(wrong)} passage ids are not ClueWeb22 passage ids (clueweb22-en0000-00-00000:0), "
            f"e.g. {wrong[0]!r}"
        )


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_statement_id(value: Any) -> bool:
    """Statement ids are integers; the organisers' samples write them as digit strings, which their parser takes."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and _DIGITS.fullmatch(value) is not None
    )
