"""The judged sample: a fixed sample of development turns whose answers a reader judges, paired and blind, with the
rubric of the answer-judging guide (answers 0/1/2, clean, correct, useful).

ROUGE and METEOR reward filling the word budget; they see no cut sentence, no boilerplate, no answer about
something else. A change to the answer stages is taken only if this sample, judged, does not get worse (README,
"Benchmarks"; docs/benchmarks.md).

``sample`` draws the sample once (committed as ``bench/judged/sample.tsv``): turns with a written response, half
from CAsT 2022 dev and half from iKAT 2023 (train and test 9-14), spread over their conversations.

``sheet`` writes the paired sheet for two pooled-benchmark runs (``bench/pooled.py run --out DIR``): for each turn
the earlier user turns, the question, the manual rewrite, answers A and B and the written response, with a blank
line per answer to fill. Which run is A is drawn at random per turn and written to a key file that the judge does
not see.

``score`` reads a filled sheet and its key: per run, the mean of ``answers``, the share of answers scoring 2, and the
shares clean, correct and useful; paired, the turns where the second run is better, equal or worse on ``useful``
and on ``answers``.

Usage:
    .venv/bin/python bench/judged.py sample --out bench/judged/sample.tsv
    .venv/bin/python bench/judged.py sheet --old runs/pooled/offline --new runs/pooled/candidate \\
        --sheet bench/judged/sheets/candidate.md --key bench/judged/keys/candidate.tsv
    .venv/bin/python bench/judged.py score --sheet bench/judged/sheets/candidate.md \\
        --key bench/judged/keys/candidate.tsv
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import DATA, documented_parser, existing_path, run  # noqa: E402
from bench.pooled import DATASETS, load_dataset  # noqa: E402

SAMPLE = REPO / "bench" / "judged" / "sample.tsv"
SEED = 20261127
PER_SOURCE = 42  # turns from CAsT 2022 dev and from iKAT 2023
RUBRIC = ("answers", "clean", "correct", "useful")
_FILLED = re.compile(r"^(?P<side>[AB]): " + " ".join(rf"{name}=(?P<{name}>\S*)" for name in RUBRIC) + r"\s*$")
_TURN = re.compile(r"^## (?P<number>\d+)\. turn (?P<dataset>\S+) (?P<qid>\S+)\s*$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = documented_parser(__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    draw = commands.add_parser("sample", help="draw the fixed sample of turns")
    draw.add_argument(
        "--data", type=existing_path, default=DATA, help="the data folder (default: %(default)s)"
    )
    draw.add_argument("--out", type=Path, default=SAMPLE, help="the sample file (default: %(default)s)")
    sheet = commands.add_parser("sheet", help="write a blind paired sheet and its key")
    sheet.add_argument("--old", type=existing_path, required=True, help="the baseline run's --out folder")
    sheet.add_argument("--new", type=existing_path, required=True, help="the candidate run's --out folder")
    sheet.add_argument("--sample", type=existing_path, default=SAMPLE, help="default: %(default)s")
    sheet.add_argument(
        "--data", type=existing_path, default=DATA, help="the data folder (default: %(default)s)"
    )
    sheet.add_argument("--sheet", type=Path, required=True, help="the sheet to write (Markdown)")
    sheet.add_argument("--key", type=Path, required=True, help="the key to write: which run is A, per turn")
    sheet.add_argument("--seed", type=int, default=SEED, help="draws A and B per turn (default: %(default)s)")
    score = commands.add_parser("score", help="score a filled sheet with its key")
    score.add_argument("--sheet", type=existing_path, required=True)
    score.add_argument("--key", type=existing_path, required=True)
    return parser.parse_args(argv)


# --- the sample --------------------------------------------------------------------------------------------------


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
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [(dataset, qid) for dataset, qid in rows]


# --- the sheet ---------------------------------------------------------------------------------------------------


def turns_by_qid(data: Path) -> dict[tuple[str, str], tuple[Any, list[str]]]:
    """Each turn by ``(dataset, qid)``, with the utterances before it in its conversation."""
    found = {}
    for dataset in DATASETS:
        for conversation in load_dataset(data, dataset):
            earlier: list[str] = []
            for turn in conversation.turns:
                found[(dataset.name, turn.qid)] = (turn, list(earlier))
                earlier.append(turn.utterance)
    return found


def answers_of(folder: Path) -> dict[tuple[str, str], str]:
    from cast.formats.answers import read_answers

    answers = {}
    for dataset in DATASETS:
        path = folder / f"{dataset.name}.answers.jsonl"
        if path.is_file():
            for qid, answer in read_answers(path).answers.items():
                answers[(dataset.name, qid)] = answer.text
    return answers


def write_sheet(args: argparse.Namespace) -> int:
    from cast.errors import CastError
    from cast.infra.atomic import write_text_atomic

    sample = read_sample(args.sample)
    turns = turns_by_qid(args.data)
    old, new = answers_of(args.old), answers_of(args.new)
    missing = [f"{d} {q}" for d, q in sample if (d, q) not in old or (d, q) not in new]
    if missing:
        raise CastError(f"turns of the sample with no answer in a run: {', '.join(missing[:5])}")
    rng = random.Random(args.seed)
    lines = [
        "# Judging sheet",
        "",
        "Judge each answer with the rubric (answers 0/1/2, clean 0/1, correct 0/1, useful 0/1): fill in the numbers",
        "after the = signs on the `A:` and `B:` lines, and change nothing else.",
        "",
    ]
    key = ["number\tdataset\tqid\tA\tB"]
    for number, (dataset, qid) in enumerate(sample, start=1):
        turn, earlier = turns[(dataset, qid)]
        sides = ["old", "new"]
        rng.shuffle(sides)
        texts = {"old": old[(dataset, qid)], "new": new[(dataset, qid)]}
        lines += [f"## {number}. turn {dataset} {qid}", ""]
        lines += ["Earlier user turns:", ""]
        lines += [f"- {u}" for u in earlier] or ["- (none)"]
        lines += [
            "",
            f"Question: {turn.utterance}",
            "",
            f"Manual rewrite: {turn.manual_rewrite or turn.utterance}",
            "",
            f"ANSWER A: {texts[sides[0]]}",
            "",
            f"ANSWER B: {texts[sides[1]]}",
            "",
            f"REFERENCE: {' '.join((turn.response or '').split())}",
            "",
            "A: " + " ".join(f"{name}=" for name in RUBRIC),
            "B: " + " ".join(f"{name}=" for name in RUBRIC),
            "",
        ]
        key.append(f"{number}\t{dataset}\t{qid}\t{sides[0]}\t{sides[1]}")
    args.sheet.parent.mkdir(parents=True, exist_ok=True)
    args.key.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.sheet, "\n".join(lines))
    write_text_atomic(args.key, "\n".join(key) + "\n")
    print(f"wrote {args.sheet} ({len(sample)} turns) and its key {args.key}")
    return 0


# --- scoring -----------------------------------------------------------------------------------------------------


def read_judgements(path: Path) -> dict[int, dict[str, dict[str, int]]]:
    """``{turn number: {"A": {measure: value}, "B": {...}}}`` from a filled sheet."""
    from cast.errors import DataFormatError

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


def judged_turns(sheet: Path, key: Path) -> list[tuple[str, str, dict[str, dict[str, Any]]]]:
    """``(dataset, qid, {run: {"text": its answer, measure: value...}})`` for every turn of a filled sheet, with
    its key telling which run each side is (``old`` or ``new``).

    Raises:
        CastError: a turn is not judged on both answers.
    """
    from cast.errors import CastError

    judged = read_judgements(sheet)
    texts = read_sheet_answers(sheet)
    turns = []
    for line in key.read_text().splitlines()[1:]:
        if not line.strip():
            continue
        number, dataset, qid, side_a, side_b = line.split("\t")
        sides = judged.get(int(number), {})
        if set(sides) != {"A", "B"}:
            raise CastError(f"turn {number} ({qid}) is not judged on both answers in {sheet}")
        runs = {
            run: {"text": texts.get((int(number), side), ""), **sides[side]}
            for run, side in ((side_a, "A"), (side_b, "B"))
        }
        turns.append((dataset, qid, runs))
    return turns


def read_sheet_answers(path: Path) -> dict[tuple[int, str], str]:
    """``{(turn number, "A" or "B"): answer text}`` as a sheet shows them."""
    texts: dict[tuple[int, str], str] = {}
    number = None
    for line in path.read_text().splitlines():
        heading = _TURN.match(line)
        if heading:
            number = int(heading["number"])
        elif number is not None and line.startswith(("ANSWER A: ", "ANSWER B: ")):
            texts[(number, line[7])] = line[len("ANSWER A: ") :]
    return texts


def score_sheet(args: argparse.Namespace) -> int:
    by_run: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _, _, runs in judged_turns(args.sheet, args.key):
        for name, judgement in runs.items():
            by_run[name].append(judgement)
    print("| run | judged | mean answers | % answers=2 | % clean | % correct | % useful |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, judgements in by_run.items():
        s = rubric_scores(judgements)
        print(
            f"| {name} | {s['n']:.0f} | {s['mean answers']:.2f} | {s['% answers=2']:.1f} | {s['% clean']:.1f} | "
            f"{s['% correct']:.1f} | {s['% useful']:.1f} |"
        )
    for measure in ("useful", "answers"):
        better, equal, worse = paired(by_run["old"], by_run["new"], measure)
        print(f"new against old on {measure}: better {better}, equal {equal}, worse {worse}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "sample":
        from cast.infra.atomic import write_text_atomic

        sample = draw_sample(args.data)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, "dataset\tqid\n" + "".join(f"{d}\t{q}\n" for d, q in sample))
        print(f"wrote {args.out}: {len(sample)} turns")
        return 0
    return write_sheet(args) if args.command == "sheet" else score_sheet(args)


if __name__ == "__main__":
    sys.exit(run(main))
