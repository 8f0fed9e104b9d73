"""``cast eval``: retrieval and answer measures, comparison tables with significance tests, and reports."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cast.errors import CastError

if TYPE_CHECKING:
    from cast.evaluate.answers import AnswerEvaluation, AnswersFile
    from cast.evaluate.retrieval import RetrievalEvaluation


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="evaluate runs and answers; write reports")
    commands = parser.add_subparsers(dest="eval_command", metavar="WHAT", required=True)

    retrieval = commands.add_parser(
        "retrieval", help="nDCG@3, nDCG@10, MAP, MRR, R@100, R@1000 of run files against qrels"
    )
    retrieval.add_argument("--run", nargs="+", required=True, metavar="RUN", help="TREC run file(s)")
    _add_retrieval_options(retrieval)
    _add_table_options(retrieval)
    retrieval.set_defaults(func=main_retrieval)

    answers = commands.add_parser("answers", help="ROUGE, BLEU, METEOR, length and groundedness of answers")
    answers.add_argument("--answers", nargs="+", required=True, metavar="FILE", help="answers JSONL file(s)")
    add_answer_options(answers)
    _add_table_options(answers)
    answers.set_defaults(func=main_answers)

    ptkb = commands.add_parser("ptkb", help="nDCG@3, P@3, R@3 of the PTKB statement rankings (TREC iKAT)")
    ptkb.add_argument("--answers", nargs="+", required=True, metavar="FILE", help="answers JSONL file(s)")
    ptkb.add_argument("--topics", required=True, type=Path, help="the iKAT topics (their ptkb_provenance)")
    ptkb.add_argument(
        "--qrels", type=Path, help="statement qrels instead (e.g. 2023_test_9-14.ptkb_rel_nist)"
    )
    _add_table_options(ptkb)
    ptkb.set_defaults(func=main_ptkb)

    report = commands.add_parser("report", help="a Markdown + CSV report with tables and PNG figures")
    report.add_argument("--runs", nargs="*", default=[], metavar="RUN", help="TREC run file(s)")
    report.add_argument("--answers", nargs="*", default=[], metavar="FILE", help="answers JSONL file(s)")
    report.add_argument("--out", required=True, type=Path, help="folder for report.md, CSVs and figures")
    report.add_argument("--baseline", help="the system the others are tested against (name or file)")
    report.add_argument(
        "--calibration",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="length calibrations for the answer-length figure: `cast calibrate` TSVs (min_length, "
        "average_words) or CSVs (min_length, words[, system]); a file without a system column is named after itself",
    )
    _add_retrieval_options(report, qrels_required=False)
    add_answer_options(report, with_qrels=False)
    report.set_defaults(func=main_report)


def _add_retrieval_options(parser: argparse.ArgumentParser, qrels_required: bool = True) -> None:
    parser.add_argument("--qrels", required=qrels_required, type=Path, help="TREC qrels (graded 0-4)")
    parser.add_argument(
        "--rel",
        type=_grade_at_least_one,
        default=1,
        help="lowest grade counted relevant by MAP, MRR and recall (default 1)",
    )


def _grade_at_least_one(text: str) -> int:
    try:
        grade = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if grade < 1:
        raise argparse.ArgumentTypeError(
            f"{grade} counts unjudged (grade 0) passages as relevant: give 1 or more"
        )
    return grade


def add_answer_options(parser: argparse.ArgumentParser, with_qrels: bool = True) -> None:
    from cast.evaluate.answers import DEFAULT_REFERENCE_GRADE, DEFAULT_SUPPORT_THRESHOLD

    if with_qrels:
        parser.add_argument("--qrels", type=Path, help="qrels whose passages graded 3-4 are the references")
    parser.add_argument("--topics", type=Path, help="topics file with written responses (CAsT 2022)")
    parser.add_argument(
        "--references",
        choices=["responses", "qrels"],
        help="the topics' written responses, or the passages the qrels grade --reference-grade or higher "
        "(default: responses when --topics is given, else qrels)",
    )
    parser.add_argument("--reference-grade", type=int, default=DEFAULT_REFERENCE_GRADE)
    parser.add_argument(
        "--multi-ref",
        choices=["max", "concat"],
        default="max",
        help="several references: best score over them (max) or one concatenated reference",
    )
    sources = parser.add_mutually_exclusive_group()
    sources.add_argument(
        "--collection", nargs="+", type=Path, metavar="PATH", help="collection file(s) holding passage texts"
    )
    sources.add_argument("--index", type=Path, help="Lucene index holding passage texts (raw documents)")
    parser.add_argument(
        "--support-threshold",
        type=float,
        default=DEFAULT_SUPPORT_THRESHOLD,
        help="unigram F1 from which an answer sentence counts as supported by a passage sentence",
    )


def _add_table_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", help="the system the others are tested against (name or file)")
    parser.add_argument(
        "--per-turn", metavar="CSV", help="write per-turn values to this CSV ('-': print them)"
    )
    parser.add_argument(
        "--csv", metavar="CSV", type=Path, help="write the comparison table (means) to this CSV"
    )


# --- commands --------------------------------------------------------------------------------------------------


def main_retrieval(args: argparse.Namespace) -> int:
    evaluations = retrieval_evaluations(args.run, args.qrels, args.rel)
    _print_comparison({n: e.per_turn for n, e in evaluations.items()}, args, _notes(evaluations))
    return 0


def main_answers(args: argparse.Namespace) -> int:
    evaluations = answer_evaluations(args.answers, args)
    _print_comparison({n: e.per_turn for n, e in evaluations.items()}, args, _notes(evaluations))
    return 0


def main_ptkb(args: argparse.Namespace) -> int:
    from cast.evaluate.ptkb import evaluate_ptkb, ptkb_qrels, ptkb_rankings
    from cast.topics import load_topics, read_qrels

    qrels = read_qrels(args.qrels) if args.qrels else ptkb_qrels(load_topics(args.topics))
    per_turn = {
        name: evaluate_ptkb(ptkb_rankings(_read_answers_file(path).records.values()), qrels)
        for name, path in zip(_unique_names(args.answers), args.answers, strict=True)
    }
    judged = len(next(iter(per_turn.values())))
    _print_comparison(per_turn, args, [f"{judged} turns with a relevant statement; others are not judged"])
    return 0


def main_report(args: argparse.Namespace) -> int:
    from cast.evaluate import report as rep

    if not args.runs and not args.answers:
        raise CastError("give --runs and/or --answers to report on")
    if args.runs and args.qrels is None:
        raise CastError("--runs needs --qrels")
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise CastError(f"--out {out} is a file; give a folder for the report")
    # Every input is read and checked before the first file is written: a failed report leaves no half of one.
    calibration = _read_calibrations(args.calibration) if args.calibration else None
    depths = _depths(args)
    retrieval = retrieval_evaluations(args.runs, args.qrels, args.rel) if args.runs else {}
    answers_files = [_read_answers_file(p) for p in args.answers]
    answers = answer_evaluations(args.answers, args, answers_files) if args.answers else {}
    if args.baseline is not None:  # a name that is neither a run nor an answers file is an error
        _baseline(args.baseline, {**retrieval, **answers})
    out.mkdir(parents=True, exist_ok=True)
    sections = ["# Evaluation report", ""]
    figures: list[str] = []
    for kind, evaluations in (("retrieval", retrieval), ("answers", answers)):
        if not evaluations:
            continue
        per_turn = {n: e.per_turn for n, e in evaluations.items()}
        # The baseline applies to the table that has it (a run name for retrieval, an answers name for answers).
        baseline = _baseline(args.baseline, evaluations) if _has(args.baseline, evaluations) else None
        comparison = rep.compare(per_turn, baseline)
        rep.write_csv(out / f"{kind}.csv", comparison.means)
        rep.write_csv(out / f"{kind}_tests.csv", comparison.tests)
        rep.write_csv(out / f"{kind}_per_turn.csv", rep.long_per_turn(per_turn, depths), index=False)
        sections.append(rep.comparison_section(kind.capitalize(), comparison, _notes(evaluations)))
    figures += _figures(out, retrieval, answers, answers_files, depths, calibration)
    sections.append("## Figures\n")
    sections += [f"- {line}" for line in figures]
    rep.write_text(out / "report.md", "\n".join(sections) + "\n")
    print(f"wrote {out / 'report.md'} with its tables and figures in {out}")
    return 0


# --- evaluation ------------------------------------------------------------------------------------------------


def retrieval_evaluations(
    runs: Sequence[str | Path], qrels_path: Path, rel: int
) -> dict[str, RetrievalEvaluation]:
    """Evaluate each run file against the qrels, keyed by system name."""
    from cast.evaluate.retrieval import evaluate_run
    from cast.runfile import read_run
    from cast.topics import read_qrels

    qrels = read_qrels(qrels_path)
    names = _unique_names(runs)
    evaluations = {}
    for name, path in zip(names, runs, strict=True):
        run = read_run(path)
        evaluation = evaluate_run(run, qrels, rel)
        if len(evaluation.missing_turns) == len(evaluation.per_turn):
            # Every figure would be 0 (or NaN): the run and the qrels are of different topics or years.
            raise CastError(
                f"no turn of {path} is judged in {qrels_path} (run turns e.g. {next(iter(run))}, judged turns "
                f"e.g. {next(iter(evaluation.per_turn.index), 'none')}): give the qrels of the run's topics"
            )
        evaluations[name] = evaluation
    return evaluations


def answer_evaluations(
    paths: Sequence[str | Path], args: argparse.Namespace, files: list[AnswersFile] | None = None
) -> dict[str, AnswerEvaluation]:
    """Evaluate each answers file against the references the options choose, keyed by system name."""
    from tqdm import tqdm

    from cast.evaluate import answers as ans

    files = files or [_read_answers_file(p) for p in paths]
    names = _unique_names(paths)
    kind = args.references or ("responses" if args.topics else "qrels")
    needed_ids: set[str] = {pid for f in files for a in f.answers.values() for pid in a.source_ids}
    reference_ids: dict[str, list[str]] = {}
    if kind == "responses":
        if args.topics is None:
            raise CastError("--references responses needs --topics (a topics file with written responses)")
        from cast.topics import load_topics

        references = ans.response_references(load_topics(args.topics))
        described = f"the written responses of {args.topics.name}"
        if not references:
            raise CastError(f"{args.topics} has no written responses; use --references qrels with --qrels")
    else:
        if args.qrels is None:
            raise CastError("--references qrels needs --qrels")
        from cast.topics import read_qrels

        reference_ids = ans.relevant_passage_ids(read_qrels(args.qrels), args.reference_grade)
        needed_ids |= {pid for ids in reference_ids.values() for pid in ids}
        described = f"the passages graded {args.reference_grade}+ in {args.qrels.name}"
    texts = _passage_texts(args, needed_ids)
    if kind == "qrels":
        if texts is None:
            raise CastError("--references qrels needs the passage texts: give --collection or --index")
        references, missing = ans.passage_references(reference_ids, texts)
        if missing:
            described += f" ({len(missing)} reference passages not found, e.g. {missing[0]})"
    scorer = ans.TextScorer(args.multi_ref)
    evaluations = {}
    for name, answers_file in zip(names, files, strict=True):
        if not set(answers_file.answers) & set(references):
            raise CastError(
                f"no turn of {answers_file.path} has a reference in {described} (answered turns e.g. "
                f"{next(iter(answers_file.answers))}, referenced e.g. {next(iter(references), 'none')}): give the "
                "topics or qrels of the answers' turns"
            )
        evaluations[name] = ans.evaluate_answers(
            answers_file,
            references,
            scorer=scorer,
            references_name=described,
            passage_texts=texts,
            support_threshold=args.support_threshold,
            progress=lambda items, name=name: tqdm(items, desc=f"scoring {name}", leave=False),
        )
    return evaluations


def _read_answers_file(path: str | Path) -> AnswersFile:
    from cast.evaluate.answers import read_answers

    return read_answers(path)


def _passage_texts(args: argparse.Namespace, ids: set[str]) -> dict[str, str] | None:
    from cast.evaluate import answers as ans

    if args.collection:
        return ans.passages_from_collection(args.collection, ids)
    if args.index:
        return ans.passages_from_index(args.index, ids)
    return None


# --- output ----------------------------------------------------------------------------------------------------


def _print_comparison(per_turn: dict[str, Any], args: argparse.Namespace, notes: list[str]) -> None:
    from cast.evaluate import report as rep

    baseline = _baseline(args.baseline, per_turn)
    comparison = rep.compare(per_turn, baseline)
    print(comparison.formatted().to_string())
    print()
    if baseline is not None:
        print(comparison.legend())
    for note in notes:
        print(f"note: {note}")
    if args.csv:
        rep.write_csv(args.csv, comparison.means)
    if args.per_turn == "-":
        print(rep.long_per_turn(per_turn).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    elif args.per_turn:
        rep.write_csv(args.per_turn, rep.long_per_turn(per_turn), index=False)


def _notes(evaluations: dict[str, Any]) -> list[str]:
    return [f"{name}: {note}" for name, evaluation in evaluations.items() for note in evaluation.notes()]


def _unique_names(paths: Sequence[str | Path]) -> list[str]:
    from cast.evaluate.answers import system_name

    names = [system_name(p) for p in paths]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CastError(f"several files are named {repeated[0]!r}: give each system's file a distinct name")
    return names


def _baseline(given: str | None, systems: dict[str, Any]) -> str | None:
    from cast.evaluate.answers import system_name

    if given is None:
        return None
    for candidate in (given, system_name(given)):
        if candidate in systems:
            return candidate
    raise CastError(f"--baseline {given!r} is none of the systems: {', '.join(systems)}")


def _has(given: str | None, systems: dict[str, Any]) -> bool:
    from cast.evaluate.answers import system_name

    return given is not None and (given in systems or system_name(given) in systems)


def _depths(args: argparse.Namespace) -> dict[str, int] | None:
    from cast.evaluate import report as rep

    if args.topics is not None:
        from cast.topics import load_topics

        return rep.turn_depths(load_topics(args.topics))
    return None


def _figures(
    out: Path,
    retrieval: dict[str, RetrievalEvaluation],
    answers: dict[str, AnswerEvaluation],
    answers_files: list[AnswersFile],
    depths: dict[str, int] | None,
    calibration: Any,
) -> list[str]:
    """Draw the figures the inputs allow; return one Markdown line per figure, or why it was skipped."""
    import pandas as pd

    from cast.evaluate import plots
    from cast.evaluate import report as rep

    lines = []
    qids = {q for e in [*retrieval.values(), *answers.values()] for q in e.per_turn.index}
    depths = depths or rep.depths_from_qids(qids)
    ndcg = (
        rep.mean_by_depth({n: e.per_turn for n, e in retrieval.items()}, "nDCG@3", depths)
        if retrieval
        else None
    )
    meteor = (
        rep.mean_by_depth({n: e.per_turn for n, e in answers.items()}, "METEOR", depths) if answers else None
    )
    ndcg = ndcg if ndcg is not None and not ndcg.empty else None
    meteor = meteor if meteor is not None and not meteor.empty else None
    if ndcg is None and meteor is None:
        lines.append("Turn-depth figure skipped: turn depths unknown (give --topics) or no runs/answers.")
    else:
        plots.depth_plot(ndcg, meteor, out / "depth.png")
        lines.append("![nDCG@3 and METEOR by turn depth](depth.png)")

    lengths = calibration if calibration is not None else _lengths(answers, answers_files)
    if lengths is None:
        lines.append(
            "Answer-length figure skipped: give --calibration (a `cast calibrate` table) or answers files "
            "whose config records the summarizer's min_length."
        )
    else:
        plots.length_plot(lengths, out / "length.png")
        lines.append("![Answer length vs minimum length](length.png)")

    rows = []
    for answers_file in answers_files:
        first = next(iter(answers_file.records.values()))
        method, gamma, variant = plots.selector_settings(first, answers_file.name)
        if method is not None and answers_file.name in answers:
            label = f"{method}+{variant}" if variant else method
            rows.append({"method": label, "gamma": gamma, **answers[answers_file.name].mean().to_dict()})
    if rows:
        plots.method_gamma_plot(pd.DataFrame(rows).astype({"gamma": float}), out / "method_gamma.png")
        lines.append("![Selection method × γ](method_gamma.png)")
    else:
        lines.append("Method × γ figure skipped: no answers file names its selection method.")
    return lines


def _read_calibrations(paths: list[Path]) -> Any:
    """Mean answer words per min_length (and system) from length calibration files."""
    import pandas as pd

    from cast.errors import DataFormatError

    tables = []
    for path in paths:
        try:
            table = pd.read_csv(path, sep=None, engine="python")  # CSV or TSV
        except (OSError, ValueError) as e:
            raise DataFormatError(path, f"cannot read the length calibration: {e}") from e
        table = table.rename(columns={"average_words": "words"})
        missing = {"min_length", "words"} - set(table.columns)
        if missing:
            raise DataFormatError(path, f"missing column(s) {', '.join(sorted(missing))}")
        if "system" not in table.columns:
            table["system"] = path.stem
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def _lengths(answers: dict[str, AnswerEvaluation], files: list[AnswersFile]) -> Any:
    """Mean answer words per min_length, from the answers files' summarizer settings (None without any)."""
    import pandas as pd

    rows = []
    for answers_file in files:
        summarizer = (next(iter(answers_file.records.values())).get("config") or {}).get("summarizer") or {}
        if "min_length" in summarizer and answers_file.name in answers:
            rows.append(
                {
                    "system": summarizer.get("name", "generator"),
                    "min_length": summarizer["min_length"],
                    "words": answers[answers_file.name].mean()["words"],
                }
            )
    return pd.DataFrame(rows) if rows else None
