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
not see. ``--parts 2`` writes it in two files of consecutive turns (``SHEET-1.md``, ``SHEET-2.md``), one per judge;
``--part K`` only the Kth (A and B drawn for every turn as before, so the key is the same).

``score`` reads a filled sheet (or its filled parts, together) and its key: per run, the mean of ``answers``, the
share of answers scoring 2, and the shares clean, correct and useful; paired, the turns where the second run is better, equal or worse on ``useful``
and on ``answers``.

``agreement`` tells how the automatic form checks (:mod:`cast.evaluate.form`: cut, boilerplate, malformed,
dangling) agree with the readers' ``clean`` on a filled sheet: an answer is predicted clean where no check finds a
fault. Each answer is checked as its run wrote it (``--old``/``--new``: the run folders, whose answers cite their
passages, read from ``--index``), or from the sheet's text where no run is given (no sentence attributed, so a
sentence leaning on what came before counts wherever it stands). The turns are split in two: the checks were
developed on the readers' labels of the turns numbered 1 and 2 modulo 3; those numbered 0 modulo 3 are held out.

Usage:
    .venv/bin/python bench/judged.py sample --out bench/judged/sample.tsv
    .venv/bin/python bench/judged.py sheet --old runs/pooled/offline --new runs/pooled/candidate \\
        --sheet bench/judged/sheets/candidate.md --key bench/judged/keys/candidate.tsv
    .venv/bin/python bench/judged.py score --sheet bench/judged/sheets/candidate.md \\
        --key bench/judged/keys/candidate.tsv
    .venv/bin/python bench/judged.py score --sheet bench/judged/sheets/candidate-1.judged.md \\
        bench/judged/sheets/candidate-2.judged.md --key bench/judged/keys/candidate.tsv
    .venv/bin/python bench/judged.py agreement --sheet bench/judged/sheets/candidate.judged.md \\
        --key bench/judged/keys/candidate.tsv --new runs/pooled/candidate --index indexes/pooled-dev
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from cast.benchmark.datasets import DATASETS, load_dataset
from cast.benchmark.judged import (
    SEED,
    draw_sample,
    judged_turns,
    paired,
    read_judgements,
    read_sample,
    rubric_scores,
    sheet_answers,
    turn_block,
)
from cast.benchmark.scripts import DATA, REPO, documented_parser, existing_path, run

SAMPLE = REPO / "bench" / "judged" / "sample.tsv"


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
    sheet.add_argument(
        "--parts",
        type=int,
        default=1,
        help="write the sheet in this many files of consecutive turns (SHEET-1.md, ...), one per judge "
        "(default: %(default)s)",
    )
    sheet.add_argument(
        "--part",
        type=int,
        help="write only this part (numbered from 1; the key is written whole): a part whose turns both runs have "
        "answered while the others' runs go on",
    )
    score = commands.add_parser("score", help="score a filled sheet with its key")
    score.add_argument(
        "--sheet", type=existing_path, nargs="+", required=True, help="the filled sheet, or its parts"
    )
    score.add_argument("--key", type=existing_path, required=True)
    agree = commands.add_parser(
        "agreement", help="the form checks against the readers' clean, per turn split"
    )
    agree.add_argument("--sheet", type=existing_path, required=True, help="a filled sheet")
    agree.add_argument("--key", type=existing_path, required=True)
    agree.add_argument(
        "--old", type=existing_path, help="the old side's run folder (default: the sheet's text)"
    )
    agree.add_argument(
        "--new", type=existing_path, help="the new side's run folder (default: the sheet's text)"
    )
    agree.add_argument(
        "--index", type=existing_path, help="the runs' index, for the passages their answers cite"
    )
    return parser.parse_args(argv)


# --- the sample --------------------------------------------------------------------------------------------------


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
    parts = sheet_parts(args.sheet, list(range(len(sample))), args.parts)
    if args.part is not None:
        if not 1 <= args.part <= len(parts):
            raise CastError(f"--part {args.part}: the sheet is written in {len(parts)} parts")
        parts = [parts[args.part - 1]]
    written = {i for _, indices in parts for i in indices}
    missing = [
        f"{d} {q}"
        for i, (d, q) in enumerate(sample)
        if i in written and ((d, q) not in old or (d, q) not in new)
    ]
    if missing:
        raise CastError(f"turns of the sample with no answer in a run: {', '.join(missing[:5])}")
    header = [
        "# Judging sheet",
        "",
        "Judge each answer with the rubric (answers 0/1/2, clean 0/1, correct 0/1, useful 0/1): fill in the numbers",
        "after the = signs on the `A:` and `B:` lines, and change nothing else.",
        "",
    ]
    # A and B are drawn for every turn in the sample's order, whichever part is written: the key is the same.
    rng = random.Random(args.seed)
    blocks = {}
    key = ["number\tdataset\tqid\tA\tB"]
    for number, (dataset, qid) in enumerate(sample, start=1):
        sides = ["old", "new"]
        rng.shuffle(sides)
        key.append(f"{number}\t{dataset}\t{qid}\t{sides[0]}\t{sides[1]}")
        if number - 1 in written:
            turn, earlier = turns[(dataset, qid)]
            texts = {"old": old[(dataset, qid)], "new": new[(dataset, qid)]}
            blocks[number - 1] = turn_block(number, dataset, turn, earlier, texts[sides[0]], texts[sides[1]])
    args.sheet.parent.mkdir(parents=True, exist_ok=True)
    args.key.parent.mkdir(parents=True, exist_ok=True)
    for path, indices in parts:
        write_text_atomic(path, "\n".join(header + [line for i in indices for line in blocks[i]]))
        print(f"wrote {path} ({len(indices)} turns)")
    write_text_atomic(args.key, "\n".join(key) + "\n")
    print(f"wrote the key {args.key} ({len(sample)} turns)")
    return 0


def sheet_parts(sheet: Path, turns: list[int], parts: int) -> list[tuple[Path, list[int]]]:
    """The sheet's turns in ``parts`` files of consecutive turns (the first ones one turn longer where they do not
    divide evenly): ``sheet`` itself for one part, ``SHEET-1.md``, ``SHEET-2.md``, ... for several."""
    from cast.errors import CastError

    if not 1 <= parts <= len(turns):
        raise CastError(
            f"--parts {parts}: a sheet of {len(turns)} turns is written in 1 to {len(turns)} parts"
        )
    if parts == 1:
        return [(sheet, turns)]
    size, longer = divmod(len(turns), parts)
    found, start = [], 0
    for k in range(parts):
        end = start + size + (k < longer)
        found.append((sheet.with_name(f"{sheet.stem}-{k + 1}{sheet.suffix}"), turns[start:end]))
        start = end
    return found


# --- scoring -----------------------------------------------------------------------------------------------------


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


# --- the form checks against the readers -------------------------------------------------------------------------

HELD_OUT = 3  # turns whose number is a multiple of this are held out


def run_answers(folder: Path | None) -> dict[tuple[str, str], Any]:
    """The answers (records, with their sentences' passages) of a run folder, by ``(dataset, qid)``."""
    from cast.formats.answers import read_answers

    found: dict[tuple[str, str], Any] = {}
    for dataset in DATASETS if folder is not None else ():
        path = folder / f"{dataset.name}.answers.jsonl"
        if path.is_file():
            found.update({(dataset.name, q): a for q, a in read_answers(path).answers.items()})
    return found


def form_agreement(args: argparse.Namespace) -> int:
    from cast.core.records import Answer
    from cast.errors import CastError
    from cast.evaluate.form import form_checks
    from cast.infra.wellformed import FormReader

    judged = read_judgements(args.sheet)
    shown = sheet_answers(args.sheet)
    runs = {"old": run_answers(args.old), "new": run_answers(args.new)}
    key = [line.split("\t") for line in args.key.read_text().splitlines()[1:] if line.strip()]
    checked = []  # (side, held out, readers' clean, the checks)
    answers = []
    for number, dataset, qid, side_a, side_b in key:
        for side, letter in ((side_a, "A"), (side_b, "B")):
            text = shown[(int(number), letter)]
            written = runs[side].get((dataset, qid))
            if written is not None and written.text != text:
                raise CastError(f"turn {number} ({qid}): the {side} run's answer is not the sheet's")
            answers.append((side, int(number), letter, written or Answer(text, (), "sheet")))
    cited = {s.passage_id for *_, a in answers for s in a.sentences if s.passage_id is not None}
    if cited and args.index is None:
        raise CastError("the runs' answers cite passages: give their --index")
    from cast.evaluate.answers import passages_from_index

    passages = passages_from_index(args.index, cited) if cited else {}
    reader = FormReader()
    for side, number, letter, answer in answers:
        checks = form_checks(answer, [], passages, reader)
        checks.pop("repeat")  # the rubric's clean does not ask for it, and the sheet shows no earlier answers
        checked.append((side, number % HELD_OUT == 0, judged[number][letter]["clean"], checks))
    print("| turns | side | answers | agree | readers' unclean found | readers' clean kept |")
    print("| --- | --- | --- | --- | --- | --- |")
    for held_out in (False, True):
        for side in ("old", "new"):
            rows = [(c, k) for s, h, c, k in checked if s == side and h == held_out]
            predicted = [(c, float(not any(k.values()))) for c, k in rows]
            agree = sum(c == p for c, p in predicted)
            unclean = [p for c, p in predicted if c == 0]
            clean = [p for c, p in predicted if c == 1]
            print(
                f"| {'held out' if held_out else 'development'} | {side} | {len(rows)} | "
                f"{100 * agree / max(len(rows), 1):.1f}% | {sum(p == 0 for p in unclean)} of {len(unclean)} | "
                f"{sum(p == 1 for p in clean)} of {len(clean)} |"
            )
    print("\nper check, answers at fault (of them judged clean by the readers)")
    for check in checked[0][3]:
        faulted = [c for _, _, c, k in checked if k[check]]
        print(f"  {check}: {len(faulted)} ({sum(faulted)} judged clean)")
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
    if args.command == "agreement":
        return form_agreement(args)
    return write_sheet(args) if args.command == "sheet" else score_sheet(args)


if __name__ == "__main__":
    sys.exit(run(main))
