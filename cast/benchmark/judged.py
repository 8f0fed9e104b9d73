"""The judged sample's files: the sample of development turns, the blind paired sheet a reader fills with the
rubric of the answer-judging guide (answers 0/1/2, clean, correct, useful), and what a filled sheet and its key
tell per run (``bench/judged.py`` is the command line that writes and scores them).

A sheet holds, per turn, a heading ``## N. turn DATASET QID``, the answers as ``ANSWER A: ...`` and
``ANSWER B: ...``, and a line per side to fill (``A: answers= clean= correct= useful=``); the key tells which run
(``old`` or ``new``) each side of each turn is.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.benchmark.datasets import DATASETS, load_dataset
from cast.core.records import Turn
from cast.errors import CastError, DataFormatError

SEED = 20261127
PER_SOURCE = 42  # turns from CAsT 2022 dev and from iKAT 2023
RUBRIC = ("answers", "clean", "correct", "useful")
_FILLED = re.compile(r"^(?P<side>[AB]): " + " ".join(rf"{name}=(?P<{name}>\S*)" for name in RUBRIC) + r"\s*$")
_TURN = re.compile(r"^## (?P<number>\d+)\. turn (?P<dataset>\S+) (?P<qid>\S+)\s*$")
_ANSWER_TEXT = re.compile(r"^ANSWER (?P<side>[AB]): (?P<text>.*)$")


def draw_sample(data: Path, seed: int = SEED, per_source: int = PER_SOURCE) -> list[tuple[str, str]]:
    """``(dataset, qid)`` of the sample: ``per_source`` turns with a written response from CAsT 2022 and as many
    from iKAT 2023, drawn round-robin over each source's conversations in a seeded random order (so that every
    conversation gives a turn before any gives two). CAsT 2022's paths repeat their first turns: a turn is drawn
    once."""
    rng = random.Random(seed)
    chosen: list[tuple[str, str]] = []
    for source in ("cast2022", "ikat2023"):
        pools: list[list[tuple[str, str]]] = []
        seen: set[str] = set()
        for dataset in (d for d in DATASETS if d.name.split("-")[0] == source):
            for conversation in load_dataset(data, dataset):
                turns = []
                for turn in conversation.turns:
                    said = " ".join(turn.utterance.lower().split())
                    key = f"{conversation.topic_id.split('_')[0]}:{turn.turn_id.split('-')[-1]}:{said}"
                    if turn.response and key not in seen:
                        seen.add(key)
                        turns.append((dataset.name, turn.qid))
                rng.shuffle(turns)
                pools.append(turns)
        rng.shuffle(pools)
        drawn: list[tuple[str, str]] = []
        while len(drawn) < per_source and any(pools):
            for pool in pools:
                if pool and len(drawn) < per_source:
                    drawn.append(pool.pop())
        chosen.extend(sorted(drawn))
    return chosen


def read_sample(path: Path) -> list[tuple[str, str]]:
    """``(dataset, qid)`` of a sample file (a header line, then one tab-separated turn a line)."""
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [(dataset, qid) for dataset, qid in rows]


def turn_block(number: int, dataset: str, turn: Turn, earlier: Sequence[str], a: str, b: str) -> list[str]:
    """One turn of the sheet: the earlier user turns, the question, its manual rewrite, answers A and B, the written
    response, and a blank line per answer to fill."""
    lines = [f"## {number}. turn {dataset} {turn.qid}", ""]
    lines += ["Earlier user turns:", ""]
    lines += [f"- {u}" for u in earlier] or ["- (none)"]
    return [
        *lines,
        "",
        f"Question: {turn.utterance}",
        "",
        f"Manual rewrite: {turn.manual_rewrite or turn.utterance}",
        "",
        f"ANSWER A: {a}",
        "",
        f"ANSWER B: {b}",
        "",
        f"REFERENCE: {' '.join((turn.response or '').split())}",
        "",
        "A: " + " ".join(f"{name}=" for name in RUBRIC),
        "B: " + " ".join(f"{name}=" for name in RUBRIC),
        "",
    ]


def read_judgements(path: Path) -> dict[int, dict[str, dict[str, int]]]:
    """``{turn number: {"A": {measure: value}, "B": {...}}}`` from a filled sheet."""
    judged: dict[int, dict[str, dict[str, int]]] = {}
    number = None
    for line_number, line in enumerate(path.read_text().splitlines(), start=1):
        heading = _TURN.match(line)
        if heading:
            number = int(heading["number"])
            continue
        filled = _FILLED.match(line.strip())
        if filled and number is not None:
            try:
                values = {name: int(filled[name]) for name in RUBRIC}
            except ValueError:
                raise DataFormatError(
                    path, f"line {line_number}: a judgement left blank or not a number"
                ) from None
            judged.setdefault(number, {})[filled["side"]] = values
    return judged


def rubric_scores(judgements: Sequence[dict[str, int]]) -> dict[str, float]:
    """Mean ``answers``, % answers = 2, % clean, % correct, % useful over the judged answers of one run."""
    n = max(len(judgements), 1)
    return {
        "n": float(len(judgements)),
        "mean answers": sum(j["answers"] for j in judgements) / n,
        "% answers=2": 100 * sum(j["answers"] == 2 for j in judgements) / n,
        "% clean": 100 * sum(j["clean"] for j in judgements) / n,
        "% correct": 100 * sum(j["correct"] for j in judgements) / n,
        "% useful": 100 * sum(j["useful"] for j in judgements) / n,
    }


def paired(
    old: Sequence[dict[str, int]], new: Sequence[dict[str, int]], measure: str
) -> tuple[int, int, int]:
    """Turns where the new run is better, equal, worse than the old on ``measure``."""
    better = sum(n[measure] > o[measure] for o, n in zip(old, new, strict=True))
    worse = sum(n[measure] < o[measure] for o, n in zip(old, new, strict=True))
    return better, len(old) - better - worse, worse


def judged_turns(sheets: Sequence[Path], key: Path) -> list[tuple[str, str, dict[str, dict[str, Any]]]]:
    """``(dataset, qid, {run: {"text": its answer, measure: value...}})`` for every turn of the filled ``sheets``
    (one sheet, or its parts), with its key telling which run each side is (``old`` or ``new``).

    Raises:
        CastError: a turn is not judged on both answers.
    """
    judged = {number: sides for sheet in sheets for number, sides in read_judgements(sheet).items()}
    texts = {place: text for sheet in sheets for place, text in sheet_answers(sheet).items()}
    turns = []
    for line in key.read_text().splitlines()[1:]:
        if not line.strip():
            continue
        number, dataset, qid, side_a, side_b = line.split("\t")
        sides = judged.get(int(number), {})
        if set(sides) != {"A", "B"}:
            named = ", ".join(str(sheet) for sheet in sheets)
            raise CastError(f"turn {number} ({qid}) is not judged on both answers in {named}")
        runs = {
            run: {"text": texts.get((int(number), side), ""), **sides[side]}
            for run, side in ((side_a, "A"), (side_b, "B"))
        }
        turns.append((dataset, qid, runs))
    return turns


def sheet_answers(path: Path) -> dict[tuple[int, str], str]:
    """``{(turn number, "A" or "B"): answer text}`` as a sheet shows them."""
    shown: dict[tuple[int, str], str] = {}
    number = None
    for line in path.read_text().splitlines():
        heading = _TURN.match(line)
        if heading:
            number = int(heading["number"])
        shown_answer = _ANSWER_TEXT.match(line)
        if shown_answer and number is not None:
            shown[(number, shown_answer["side"])] = shown_answer["text"]
    return shown
