"""``cast eval``: retrieval and answer measures, comparison tables with significance tests, and reports."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cast.core.config import DEFAULT_CONFIG, load_config
from cast.errors import CastError, DataFormatError
from cast.evaluate import plots
from cast.evaluate import report as rep
from cast.evaluate.answers import DEFAULT_REFERENCE_GRADE, DEFAULT_SUPPORT_THRESHOLD, AnswerEvaluation
from cast.evaluate.experiment import evaluate_answer_files, evaluate_nugget_files, evaluate_runs, unique_names
from cast.evaluate.nuggets import Nuggetizer, NuggetSettings
from cast.evaluate.ptkb import evaluate_ptkb, ptkb_qrels, ptkb_rankings
from cast.evaluate.retrieval import RetrievalEvaluation
from cast.evaluate.significance import CORRECTIONS
from cast.formats.answers import AnswersFile, read_answers, system_name
from cast.formats.topics import load_topics, read_qrels
from cast.infra.cache import Cache
from cast.infra.engine import BUNDLED_MODEL, LOCAL
from cast.infra.llm import ChatClient, ChatServer


def add_parser(subparsers: argparse._SubParsersAction, summary: str | None = None) -> None:
    parser = subparsers.add_parser("eval", help=summary)
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

    nuggets = commands.add_parser(
        "nuggets",
        help="nugget recall of answers (AutoNuggetizer, as TREC RAG 2024 / iKAT 2024) judged by a chat model",
        description="Nuggets (atomic facts a good answer holds, each vital or okay) are made from each turn's "
        "references by a chat model and written to --nuggets (reused, and open to review, where it exists); the "
        "model then labels each nugget supported, partly or not by each answer. Scores: all_strict, all_partial, "
        "vital_strict, vital_partial. Every model answer is cached.",
    )
    nuggets.add_argument("--answers", nargs="+", required=True, metavar="FILE", help="answers JSONL file(s)")
    nuggets.add_argument(
        "--topics", required=True, type=Path, help="the topics (each turn's query: its manual rewrite)"
    )
    nuggets.add_argument(
        "--nuggets",
        required=True,
        type=Path,
        help="the nuggets JSONL file: read where it exists, else written",
    )
    nuggets.add_argument("--qrels", type=Path, help="qrels whose passages graded 3-4 are the references")
    nuggets.add_argument(
        "--references",
        choices=["responses", "qrels"],
        help="what the nuggets are made from: the topics' written responses (the default) or the qrels' passages",
    )
    nuggets.add_argument("--reference-grade", type=int, default=DEFAULT_REFERENCE_GRADE)
    add_passage_text_arguments(nuggets)
    nuggets.add_argument(
        "--base-url",
        default=LOCAL,
        help=f"the chat model server's OpenAI-compatible API root (default {LOCAL}: the bundled SmolLM2-135M, "
        "on an engine started here)",
    )
    nuggets.add_argument(
        "--model", help=f"the model's name on the server (default with {LOCAL}: {BUNDLED_MODEL})"
    )
    nuggets.add_argument("--api-key-env", help="the environment variable holding the server's API key")
    nuggets.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    nuggets.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a request may take (default 600)"
    )
    nuggets.add_argument("--max-nuggets", type=int, default=30, help="nuggets a turn at most (default 30)")
    nuggets.add_argument("--max-tokens", type=int, default=512, help="the longest model answer (default 512)")
    nuggets.add_argument("--turns", type=Path, help="a file of qids, one a line: evaluate those turns only")
    nuggets.add_argument(
        "--cache-dir",
        type=Path,
        help="the cache, and the bundled model's folder (default: the default profile's cache_dir)",
    )
    _add_table_options(nuggets)
    nuggets.set_defaults(func=main_nuggets)

    report = commands.add_parser("report", help="a Markdown + CSV report with tables and PNG figures")
    report.add_argument("--runs", nargs="*", default=[], metavar="RUN", help="TREC run file(s)")
    report.add_argument("--answers", nargs="*", default=[], metavar="FILE", help="answers JSONL file(s)")
    report.add_argument("--out", required=True, type=Path, help="folder for report.md, CSVs and figures")
    _add_baseline_options(report)
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
    add_passage_text_arguments(parser)
    parser.add_argument(
        "--support-threshold",
        type=float,
        default=DEFAULT_SUPPORT_THRESHOLD,
        help="unigram F1 from which an answer sentence counts as supported by a passage sentence",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="add the claims verifier's measures: the share of answer sentences it finds supported by the "
        "passage each cites (verified) and their mean support (claim_support); needs the passage texts",
    )
    parser.add_argument(
        "--verifier-model",
        metavar="NLI_MODEL",
        help="with --verify: a local NLI cross-encoder (default: offline)",
    )


def _add_baseline_options(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("--baseline", help="the system the others are tested against (name or file)")
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        help="correct the p-values for testing several systems against the baseline (holm: Holm-Bonferroni, "
        "per measure); default: none",
    )


def _add_table_options(parser: argparse.ArgumentParser) -> None:
    _add_baseline_options(parser)
    parser.add_argument(
        "--per-turn", metavar="CSV", help="write per-turn values to this CSV ('-': print them)"
    )
    parser.add_argument(
        "--csv", metavar="CSV", type=Path, help="write the comparison table (means) to this CSV"
    )


# --- commands --------------------------------------------------------------------------------------------------


def main_retrieval(args: argparse.Namespace) -> int:

    evaluations = evaluate_runs(args.run, args.qrels, rel=args.rel)
    _print_comparison({n: e.per_turn for n, e in evaluations.items()}, args, _notes(evaluations))
    return 0


def main_answers(args: argparse.Namespace) -> int:

    evaluations = evaluate_answer_files(args.answers, **answer_options(args))
    _print_comparison({n: e.per_turn for n, e in evaluations.items()}, args, _notes(evaluations))
    return 0


def main_ptkb(args: argparse.Namespace) -> int:

    qrels = read_qrels(args.qrels) if args.qrels else ptkb_qrels(load_topics(args.topics))
    per_turn = {
        name: evaluate_ptkb(ptkb_rankings(read_answers(path).records.values()), qrels)
        for name, path in zip(unique_names(args.answers), args.answers, strict=True)
    }
    judged = len(next(iter(per_turn.values())))
    _print_comparison(per_turn, args, [f"{judged} turns with a relevant statement; others are not judged"])
    return 0


def main_nuggets(args: argparse.Namespace) -> int:
    if args.model is None and args.base_url != LOCAL:
        raise CastError("--model must name the model the server at --base-url serves")
    cache_dir = args.cache_dir or load_config(DEFAULT_CONFIG).get("cache_dir")
    folder = None if cache_dir is None else Path(cache_dir).expanduser()
    cache = Cache(None if folder is None else folder / "cache.sqlite")
    server = ChatServer(
        args.base_url, args.api_key_env, timeout=args.timeout, retries=1, concurrency=args.concurrency
    )
    client = ChatClient(server, cache, models_dir=None if folder is None else folder / "models")
    settings = NuggetSettings(
        model=args.model or BUNDLED_MODEL, max_nuggets=args.max_nuggets, max_tokens=args.max_tokens
    )
    nuggetizer = Nuggetizer(client, settings)
    turns = args.turns.read_text().split() if args.turns else None
    made = args.nuggets.exists()
    per_turn, nuggets = evaluate_nugget_files(
        args.answers,
        nuggetizer=nuggetizer,
        nuggets_path=args.nuggets,
        topics=args.topics,
        references=args.references,
        qrels=args.qrels,
        reference_grade=args.reference_grade,
        collection=args.collection,
        index=args.index,
        turns=turns,
    )
    counts = client.counters()
    vital = sum(n.importance == "vital" for t in nuggets.values() for n in t.nuggets)
    total = sum(len(t.nuggets) for t in nuggets.values())
    notes = [
        f"{'read' if made else 'wrote'} {args.nuggets}: {len(nuggets)} turns, {total} nuggets ({vital} vital)",
        f"{settings.model}: {counts['requests']} requests, {counts['cache_hits']} from the cache",
        nuggetizer.reply_counts(),
    ]
    _print_comparison(per_turn, args, notes)
    return 0


def main_report(args: argparse.Namespace) -> int:

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
    retrieval = evaluate_runs(args.runs, args.qrels, rel=args.rel) if args.runs else {}
    answers_files = [read_answers(p) for p in args.answers]
    answers = evaluate_answer_files(answers_files, **answer_options(args)) if answers_files else {}
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
        comparison = rep.compare(per_turn, baseline, args.correction)
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


# --- from arguments to the library ----------------------------------------------------------------------------


def answer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~cast.evaluate.experiment.evaluate_answer_files` that
    :func:`add_answer_options` read."""
    return {
        "topics": args.topics,
        "qrels": args.qrels,
        "references": args.references,
        "reference_grade": args.reference_grade,
        "multi_reference": args.multi_ref,
        "collection": args.collection,
        "index": args.index,
        "support_threshold": args.support_threshold,
        "verifier": ({"model": args.verifier_model} if args.verifier_model else {}) if args.verify else None,
    }


# --- output ----------------------------------------------------------------------------------------------------


def _print_comparison(per_turn: dict[str, Any], args: argparse.Namespace, notes: list[str]) -> None:

    baseline = _baseline(args.baseline, per_turn)
    comparison = rep.compare(per_turn, baseline, args.correction)
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


def _baseline(given: str | None, systems: dict[str, Any]) -> str | None:

    if given is None:
        return None
    for candidate in (given, system_name(given)):
        if candidate in systems:
            return candidate
    raise CastError(f"--baseline {given!r} is none of the systems: {', '.join(systems)}")


def _has(given: str | None, systems: dict[str, Any]) -> bool:

    return given is not None and (given in systems or system_name(given) in systems)


def _depths(args: argparse.Namespace) -> dict[str, int] | None:

    if args.topics is not None:
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

    lines = []
    qids = {q for e in retrieval.values() for q in e.per_turn.index} | {
        q for e in answers.values() for q in e.per_turn.index
    }
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


def add_passage_text_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the passages' texts are read: ``--collection`` files or an ``--index``'s raw documents."""
    sources = parser.add_mutually_exclusive_group()
    sources.add_argument(
        "--collection", nargs="+", type=Path, metavar="PATH", help="collection file(s) holding passage texts"
    )
    sources.add_argument("--index", type=Path, help="Lucene index holding passage texts (raw documents)")
