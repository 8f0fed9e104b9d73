"""Retrieval effectiveness of the query rewriters, with and without re-ranking, and rewrite quality.

Two commands:

``run``: on a CAsT benchmark (default: the CAsT 2022 dev topics, provenance qrels and their wiki index), for
each rewriter (raw / hqe / automatic / manual) x re-ranker (none = LMD alone / the offline bi-encoder), MRR,
nDCG@3, R@100 and Judged@10 (how much of the top 10 the qrels judge at all), and each automatic rewriter's
MRR as a share of the manual rewrites' (the goal: >= 90%)::

    .venv/bin/python bench/retrieval.py run
    .venv/bin/python bench/retrieval.py run --topics ../shared/data/cast/2020/2020_manual_evaluation_topics_v1.0.json \\
        --automatic-topics ../shared/data/cast/2020/2020_automatic_evaluation_topics_v1.0.json \\
        --qrels ../shared/data/cast/2020/2020qrels.txt --index /path/to/marco-car-index

``quality``: how close rewrites are to the manual ones, on CAsT 2019, 2020, 2021 and CANARD dev (or another
topics file with manual rewrites, ``--topics``): BLEU, ROUGE-1/2/L F1, and precision/recall/F1 of the *added*
terms (index terms a rewrite adds to the utterance, against those the manual rewrite adds; the fairest view of
HQE, whose output is a bag of keywords). HQE reads term statistics from ``--index`` (default: the CAsT 2022 dev
wiki index)::

    .venv/bin/python bench/retrieval.py quality
    .venv/bin/python bench/retrieval.py quality --set rewriter.r_topic=7 --set rewriter.eta=9
    .venv/bin/python bench/retrieval.py quality --topics my_topics.json --index /path/to/index

Turns shared by several CAsT 2022 tree paths are rewritten and evaluated once (their history is the same).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import DATA, DEFAULT_INDEX, DEV_2022, DEV_2022_QRELS, DEV_2022_TOPICS, existing_path, run  # noqa: E402

CAST = DATA / "cast"

QUALITY_SETS = {
    "cast2019": {
        "topics": CAST / "2019" / "evaluation_topics_v1.0.json",
        "rewrites": CAST / "2019" / "evaluation_topics_annotated_resolved_v1.0.tsv",
    },
    "cast2020": {
        "topics": CAST / "2020" / "2020_manual_evaluation_topics_v1.0.json",
        "automatic_topics": CAST / "2020" / "2020_automatic_evaluation_topics_v1.0.json",
    },
    "cast2021": {
        "topics": CAST / "2021" / "2021_manual_evaluation_topics_v1.0.json",
        "automatic_topics": CAST / "2021" / "2021_automatic_evaluation_topics_v1.0.json",
    },
    "canard-dev": {"canard": DATA / "canard" / "dev.json"},
}


def load_conversations(
    topics: Path, automatic_topics: Path | None = None, rewrites: Path | None = None
) -> list:
    from cast.formats.topics import load_topics

    automatic = None
    if automatic_topics is not None:
        automatic = {t.qid: t.automatic_rewrite for c in load_topics(automatic_topics) for t in c.turns}
        automatic = {qid: text for qid, text in automatic.items() if text}
    return load_topics(topics, rewrites=rewrites, automatic_rewrites=automatic)


def canard_conversations(path: Path) -> list:
    """CANARD questions as one-question conversations: the dialogue's title and earlier questions as history.

    CANARD's ``History`` is ``[title, section, q1, a1, q2, a2, ...]``; the title is kept as a first pseudo-turn
    (the rewrites often name it), the section title and the answers are not used.
    """
    from cast.core.records import Conversation, Turn

    conversations = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        history = item["History"]
        topic = f"{item['QuAC_dialog_id']}_{item['Question_no']}"
        texts = [history[0], *history[2::2], item["Question"]]
        turns = tuple(
            Turn(qid=f"{topic}_{n}", topic_id=topic, turn_id=str(n), utterance=text)
            for n, text in enumerate(texts, start=1)
        )
        turns = (*turns[:-1], replace(turns[-1], manual_rewrite=item["Rewrite"]))
        conversations.append(Conversation(topic_id=topic, turns=turns))
    return conversations


def rewrite_all(rewriter: Any, conversations: Sequence, only_last: bool = False) -> dict[str, Any]:
    """``{qid: Rewrite}`` for every turn (each qid once), rewritten as the pipeline rewrites it: later turns see
    the earlier rewrites (no passages). With ``only_last`` (CANARD), earlier questions stand as they were asked."""

    from cast.conversation.walker import Step, rewrite_conversations, walk
    from cast.core.pipeline import rewrite_turns
    from cast.core.records import PreparedTurn, Rewrite

    if not only_last:
        return {p.qid: p.rewrite for p in rewrite_conversations(rewriter, conversations)}

    def rewrite(steps: list[Step]) -> list[PreparedTurn]:
        last = [s for s in steps if s.turn is s.conversation.turns[-1]]
        rewritten = iter(rewrite_turns(rewriter, None, [(s.history, s.turn) for s in last]))
        return [
            next(rewritten) if s in last else PreparedTurn(s.turn, Rewrite(s.turn.utterance, "asked"))
            for s in steps
        ]

    taken = walk(conversations, rewrite, PreparedTurn.past_turn)
    return {p.qid: p.rewrite for p in taken if p.rewrite.method != "asked"}


def build_resources(index: Path, overrides: Sequence[str]) -> Any:
    from cast.core.config import load_config
    from cast.infra.resources import Resources

    config = load_config("offline", [f"index={index}", "device=cpu", *overrides])
    return config, Resources(config)


def stage_section(config: dict[str, Any], kind: str, spec: str) -> dict[str, Any]:
    """The ``kind`` (rewriter, reranker) section for ``spec``: ``NAME`` or ``NAME:KEY=VALUE,...`` (values read as
    YAML).

    The config's section is the base when it names the same stage (so ``--set rewriter.*`` applies).
    """
    import yaml

    name, _, settings = spec.partition(":")
    section = config.get(kind, {})
    section = dict(section) if section.get("name") == name else {"name": name}
    for assignment in filter(None, settings.split(",")):
        key, _, value = assignment.partition("=")
        section[key.strip()] = yaml.safe_load(value)
    return section


def command_run(args: argparse.Namespace) -> int:
    from cast.core.pipeline import merge_head
    from cast.core.registry import build_stage
    from cast.evaluate.retrieval import evaluate_run, judged_qrels, ranked_run
    from cast.formats.topics import read_qrels

    automatic_topics = args.automatic_topics
    if automatic_topics is None and args.topics == DEV_2022_TOPICS:
        automatic_topics = DEV_2022 / "2022_automatic_evaluation_topics_flattened_duplicated_v1.0.json"
    conversations = load_conversations(args.topics, automatic_topics, args.rewrites)
    qrels = read_qrels(args.qrels)
    config, resources = build_resources(args.index, args.overrides)
    first_stage = build_stage("first_stage", config["first_stage"], resources)
    # As `cast eval retrieval` scores them: over the judged turns, a judged turn missing from the run scoring 0.
    # Judged@10: the share of the top 10 that the qrels judge (only provenance passages are judged here).
    measures = ["MRR", "nDCG@3", "R@100", "Judged@10"]
    rerankers = {}
    for spec in args.rerankers:
        section = stage_section(config, "reranker", spec)
        depth = {"depth": args.depth} if section["name"] != "none" else {}
        rerankers[spec] = build_stage("reranker", {**section, **depth}, resources)

    table: dict[tuple[str, str], dict[str, float]] = {}
    seconds: dict[str, float] = {}
    for rewriter_name in args.rewriters:
        start = time.perf_counter()
        rewriter = build_stage("rewriter", stage_section(config, "rewriter", rewriter_name), resources)
        rewrites = rewrite_all(rewriter, conversations)
        qids = list(rewrites)
        seconds[f"rewrite {rewriter_name}"] = time.perf_counter() - start
        start = time.perf_counter()
        first = dict(zip(qids, first_stage.search_batch([rewrites[q].query for q in qids]), strict=True))
        seconds[f"search {rewriter_name}"] = time.perf_counter() - start
        for reranker_name, reranker in rerankers.items():
            start = time.perf_counter()
            if reranker.depth == 0:
                rankings = first
            else:
                heads = rerank_in_chunks(
                    reranker, [(rewrites[q].query, first[q][: args.depth]) for q in qids]
                )
                rankings = {q: merge_head(h, first[q]) for q, h in zip(qids, heads, strict=True)}
            seconds[f"rerank {rewriter_name}/{reranker_name}"] = time.perf_counter() - start
            evaluation = evaluate_run(ranked_run(rankings), qrels, args.rel, names=measures)
            table[(rewriter_name, reranker_name)] = evaluation.mean().to_dict()
            print(
                f"  {rewriter_name:>9} x {reranker_name:<9}",
                _row(table[(rewriter_name, reranker_name)]),
                flush=True,
            )

    judged = len(set(qids) & set(judged_qrels(qrels)))
    print(
        f"\n{args.topics.name}: {len(qids)} turns ({judged} judged), index {args.index}, binary rel >= {args.rel}"
    )
    print(f"{'rewriter':>24}   {'reranker':<9}  " + "  ".join(f"{str(m):>7}" for m in measures))
    for (rewriter_name, reranker_name), row in table.items():
        print(f"{rewriter_name:>24}   {reranker_name:<9}  {_row(row)}")
    mrr = measures[0]
    for reranker_name in args.rerankers:
        manual = table.get(("manual", reranker_name), {}).get(mrr)
        for rewriter_name in args.rewriters:
            if manual and rewriter_name != "manual":
                share = table[(rewriter_name, reranker_name)][mrr] / manual
                print(f"MRR share of manual, {rewriter_name} x {reranker_name}: {share:.1%}")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    return 0


def rerank_in_chunks(reranker: Any, items: list, chunk: int = 8) -> list:
    """``reranker.rerank_batch`` over a few queries at a time (a progress bar; embeddings are cached as it goes)."""
    from tqdm import tqdm

    heads = []
    for start in tqdm(range(0, len(items), chunk), desc=f"re-rank ({reranker.name})", unit="chunk"):
        heads.extend(reranker.rerank_batch(items[start : start + chunk]))
    return heads


def _row(row: dict[str, float]) -> str:
    return "  ".join(f"{v:7.4f}" for v in row.values())


def added_terms(analyze: Any, text: str, utterance: str) -> set[str]:
    """Index terms of ``text`` that are not in ``utterance``."""
    return set(analyze(text)) - set(analyze(utterance))


def command_quality(args: argparse.Namespace) -> int:
    from rouge_score import rouge_scorer
    from sacrebleu import corpus_bleu

    from cast.core.registry import build_stage
    from cast.rewrite.vocabulary import IndexVocabulary

    config, resources = build_resources(args.index, args.overrides)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rewriters = {
        spec: build_stage("rewriter", stage_section(config, "rewriter", spec), resources)
        for spec in args.methods
    }
    vocabulary = IndexVocabulary(resources)
    for spec, rewriter in rewriters.items():
        print(f"{spec}: {rewriter.describe()}")
    rows = []
    if args.topics is not None:
        sets = {
            args.topics.stem: {
                "topics": args.topics,
                "rewrites": args.rewrites,
                "automatic_topics": args.automatic_topics,
            }
        }
    else:
        sets = {name: QUALITY_SETS[name] for name in args.sets}
    for set_name, spec in sets.items():
        if "canard" in spec:
            conversations = canard_conversations(spec["canard"])
        else:
            conversations = load_conversations(
                spec["topics"], spec.get("automatic_topics"), spec.get("rewrites")
            )
        turns = {t.qid: t for c in conversations for t in c.turns if t.manual_rewrite}
        only_last = "canard" in spec
        for method in args.methods:
            if method == "automatic" and not all(t.automatic_rewrite for t in turns.values()):
                continue
            rewriter = rewriters[method]
            rewrites = rewrite_all(rewriter, conversations, only_last=only_last)
            qids = [q for q in rewrites if q in turns]
            hyps = [rewrites[q].query for q in qids]
            refs = [turns[q].manual_rewrite for q in qids]
            rouge = [scorer.score(ref, hyp) for ref, hyp in zip(refs, hyps, strict=True)]
            found = gold = hit = 0
            for q, hyp in zip(qids, hyps, strict=True):
                mine = added_terms(vocabulary.analyzed_terms, hyp, turns[q].utterance)
                wanted = added_terms(vocabulary.analyzed_terms, turns[q].manual_rewrite, turns[q].utterance)
                found, gold, hit = found + len(mine), gold + len(wanted), hit + len(mine & wanted)
            precision = hit / found if found else 0.0
            recall = hit / gold if gold else 0.0
            f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
            rows.append(
                (set_name, method, len(qids), corpus_bleu(hyps, [refs]).score)
                + tuple(
                    100 * sum(r[k].fmeasure for r in rouge) / len(rouge)
                    for k in ("rouge1", "rouge2", "rougeL")
                )
                + (100 * precision, 100 * recall, 100 * f1)
            )
            print("  " + _quality_row(rows[-1]), flush=True)
    header = ("set", "method", "turns", "BLEU", "R-1", "R-2", "R-L", "add-P", "add-R", "add-F1")
    print("\n" + f"{header[0]:<11}{header[1]:>24}{header[2]:>7}" + "".join(f"{h:>8}" for h in header[3:]))
    for row in rows:
        print(_quality_row(row))
    return 0


def _quality_row(row: tuple) -> str:
    return f"{row[0]:<11}{row[1]:>24}{row[2]:>7}" + "".join(f"{v:8.2f}" for v in row[3:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="MRR, nDCG@3, R@100 per rewriter x re-ranker")
    run_parser.add_argument(
        "--topics",
        type=existing_path,
        default=str(DEV_2022_TOPICS),
        help="CAsT topics file (2019-2022 as distributed, or the toolkit's JSON; default: CAsT 2022 dev)",
    )
    run_parser.add_argument(
        "--automatic-topics",
        type=existing_path,
        help="a topics file whose automatic rewrites are used (CAsT 2020-2022 ship them separately; default: "
        "CAsT 2022 dev's with the default --topics, else none)",
    )
    run_parser.add_argument(
        "--rewrites", type=existing_path, help="a qid TAB manual-rewrite file (CAsT 2019)"
    )
    run_parser.add_argument(
        "--qrels",
        type=existing_path,
        default=str(DEV_2022_QRELS),
        help="TREC qrels of the topics (default: CAsT 2022 dev provenance qrels)",
    )
    run_parser.add_argument(
        "--rewriters",
        nargs="+",
        default=["raw", "hqe:response_keywords=0", "hqe", "automatic", "manual"],
        help="rewriters as NAME or NAME:KEY=VALUE,... (default: raw, HQE as Lin et al., HQE with response "
        "keywords as in configs/offline.yaml, the topic file's automatic rewrites, manual)",
    )
    run_parser.add_argument(
        "--rerankers",
        nargs="+",
        default=["none", "biencoder:first_stage_weight=0", "biencoder"],
        help="re-rankers as NAME or NAME:KEY=VALUE,... (default: LMD alone, the bi-encoder's cosine alone, the "
        "bi-encoder fused with LMD as in configs/offline.yaml)",
    )
    run_parser.add_argument("--depth", type=int, default=100, help="re-rank depth (default 100)")
    run_parser.add_argument(
        "--rel", type=int, default=1, help="lowest grade counted relevant by MRR and R@100"
    )
    run_parser.set_defaults(func=command_run)
    quality = commands.add_parser(
        "quality", help="BLEU / ROUGE / added-term F1 of rewrites against manual ones"
    )
    quality.add_argument(
        "--sets",
        nargs="+",
        default=list(QUALITY_SETS),
        choices=list(QUALITY_SETS),
        help="the bundled sets of ../shared/data to score (default: all)",
    )
    quality.add_argument(
        "--topics",
        type=existing_path,
        help="score this topics file instead of --sets: its turns with a manual rewrite (in the file or "
        "--rewrites) are the references",
    )
    quality.add_argument(
        "--rewrites", type=existing_path, help="with --topics: a qid TAB manual-rewrite file"
    )
    quality.add_argument(
        "--automatic-topics", type=existing_path, help="with --topics: a topics file with automatic rewrites"
    )
    quality.add_argument(
        "--methods",
        nargs="+",
        default=["raw", "automatic", "hqe:response_keywords=0", "hqe"],
        help="as --rewriters",
    )
    quality.set_defaults(func=command_quality)
    for command in (run_parser, quality):
        command.add_argument(
            "--index",
            type=existing_path,
            default=DEFAULT_INDEX,
            help=f"the Krovetz Lucene index of the topics' collection (default: {DEFAULT_INDEX})",
        )
        command.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override the offline config, e.g. --set rewriter.r_topic=7 --set first_stage.mu=1500",
        )
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(run(main))
