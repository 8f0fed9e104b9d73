"""The iKAT 2023 dev benchmark: PTKB statement selection, retrieval with and without the PTKB, answers.

Collection: the 820k Wikipedia passages + the iKAT provenance passages (``ikat/*_psg_text.jsonl``), indexed with::

    cast index build --input ../shared/data/wiki/enwiki-2013-core.jsonl.gz \\
        ../shared/data/ikat/2023_train_topics_psg_text.jsonl ../shared/data/ikat/2023_test_topics_9-14_psg_text.jsonl \\
        --index indexes/ikat2023-dev

(``--index``, or the environment variable ``CAST_IKAT_INDEX``, names another.)

Queries: the turns of ``2023_train_topics.json`` and ``2023_test_topics_9-14.json`` (242); relevant passages: each
turn's ``response_provenance`` (197 turns have one). The other 2023 test topics are held out.

``ptkb``: nDCG@3, P@3, R@3 of each PTKB selector's statement ranking, judged with ``ptkb_provenance`` (train)
and NIST's ``2023_test_9-14.ptkb_rel_nist`` (test 9-14)::

    .venv/bin/python bench/ikat.py ptkb --selectors all bm25 biencoder biencoder:context_weight=0.4

``retrieval``: MRR, nDCG@3 and R@100 per query formulation: ``REWRITER`` or ``REWRITER+PTKB_SELECTOR`` (the
chosen statements appended to the query, the organisers' baseline), with LMD alone and LMD + the offline
bi-encoder re-ranker, and each one's MRR as a share of the manual rewrites'::

    .venv/bin/python bench/ikat.py retrieval --queries raw hqe hqe+biencoder manual:fallback=raw

``files``: both topic files as one (``topics.json``) and the provenance qrels, for ``bench/answers.py`` (O vs
EG answers) and ``cast eval``::

    .venv/bin/python bench/ikat.py files --out runs/ikat2023-dev
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import DATA, IKAT_INDEX, existing_path, run  # noqa: E402

IKAT = DATA / "ikat"
DEV_TOPICS = (IKAT / "2023_train_topics.json", IKAT / "2023_test_topics_9-14.json")
NIST_PTKB_QRELS = IKAT / "2023_test_9-14.ptkb_rel_nist"


def load_dev(topics: Sequence[Path]) -> list:
    from cast.formats.topics import load_topics

    return [conversation for path in topics for conversation in load_topics(path)]


def stage(kind: str, spec: str, config: dict[str, Any], resources: Any) -> Any:
    """A stage from ``NAME`` or ``NAME:KEY=VALUE,...``, on the config's section when it names the same stage."""
    from bench.retrieval import stage_section
    from cast.core.registry import build_stage

    return build_stage(kind, stage_section(config, kind, spec), resources)


def resources_for(index: Path, overrides: Sequence[str]) -> tuple[dict[str, Any], Any]:
    from cast.core.config import load_config
    from cast.infra.resources import Resources

    config = load_config("ikat", [f"index={index}", "device=cpu", *overrides])
    return config, Resources(config)


def personal_queries(conversations: Sequence, rewriter: Any, ptkb: Any) -> dict[str, Any]:
    """Each turn's :class:`~cast.core.records.PreparedTurn` by qid: rewritten after choosing its PTKB statements,
    turn by turn as the pipeline does (a history without passages)."""
    from cast.conversation.walker import rewrite_conversations

    return {p.qid: p for p in rewrite_conversations(rewriter, conversations, ptkb=ptkb)}


def command_ptkb(args: argparse.Namespace) -> int:
    from cast.evaluate.ptkb import evaluate_ptkb, ptkb_qrels
    from cast.formats.topics import read_qrels

    train, test = load_dev(DEV_TOPICS[:1]), load_dev(DEV_TOPICS[1:])
    judgements = {
        "train (ptkb_provenance)": (train, ptkb_qrels(train)),
        "test 9-14 (NIST)": (test, read_qrels(args.nist)),
    }
    config, resources = resources_for(args.index, args.overrides)
    raw = stage("rewriter", "raw", config, resources)
    print(f"{'selector':<36}" + "".join(f"{name:>34}" for name in judgements))
    print(f"{'':<36}" + "   nDCG@3     P@3     R@3  turns" * len(judgements))
    for spec in args.selectors:
        selector = stage("ptkb", spec, config, resources)
        start = time.perf_counter()
        cells = []
        for conversations, qrels in judgements.values():
            chosen = personal_queries(conversations, raw, selector)
            per_turn = evaluate_ptkb(
                {qid: p.ptkb.scores if p.ptkb else {} for qid, p in chosen.items()}, qrels
            )
            means = per_turn.mean()
            cells.append(f"{means['nDCG@3']:9.3f}{means['P@3']:8.3f}{means['R@3']:8.3f}{len(per_turn):7d}")
        print(
            f"{spec:<36}" + "".join(f"{c:>34}" for c in cells) + f"   ({time.perf_counter() - start:.1f} s)"
        )
    return 0


def command_retrieval(args: argparse.Namespace) -> int:
    import ir_measures
    from ir_measures import RR, R, nDCG

    from bench.retrieval import rerank_in_chunks
    from cast.core.pipeline import merge_head
    from cast.core.registry import shared_stage
    from cast.evaluate.retrieval import ranked_run
    from cast.formats.topics import provenance_qrels

    conversations = load_dev(args.topics)
    qrels = provenance_qrels(conversations)
    config, resources = resources_for(args.index, args.overrides)
    first_stage = stage("first_stage", "lmd", config, resources)
    rerankers = {"lmd": None}
    if not args.no_rerank:
        rerankers["lmd+biencoder"] = shared_stage("reranker", resources)
    measures = [RR, nDCG @ 3, R @ 100]
    table: dict[tuple[str, str], dict[str, float]] = {}
    for spec in args.queries:
        rewriter_spec, _, ptkb_spec = spec.partition("+")
        rewriter = stage("rewriter", rewriter_spec, config, resources)
        ptkb = stage("ptkb", ptkb_spec or "none", config, resources)
        queries = personal_queries(conversations, rewriter, ptkb)
        qids = list(queries)
        first = dict(
            zip(qids, first_stage.search_batch([queries[q].rewrite.query for q in qids]), strict=True)
        )
        for name, reranker in rerankers.items():
            rankings = first
            if reranker is not None:
                items = [(queries[q].rewrite.query, first[q][: reranker.depth]) for q in qids]
                heads = rerank_in_chunks(reranker, items)
                rankings = {q: merge_head(h, first[q]) for q, h in zip(qids, heads, strict=True)}
            scores = ir_measures.calc_aggregate(measures, qrels, ranked_run(rankings))
            table[(spec, name)] = {str(m): scores[m] for m in measures}
            print(f"  {spec:>28} x {name:<14}" + _row(table[(spec, name)]), flush=True)
    print(f"\n{len(qids)} turns ({len(qrels)} judged by response_provenance), index {args.index}")
    print(f"{'query':>30}   {'ranking':<14}" + "".join(f"{str(m):>9}" for m in measures) + "  MRR/manual")
    for (spec, name), row in table.items():
        manual = table.get(("manual:fallback=raw", name), {}).get("RR")
        share = f"{row['RR'] / manual:10.1%}" if manual else ""
        print(f"{spec:>30}   {name:<14}{_row(row)}  {share}")
    return 0


def command_files(args: argparse.Namespace) -> int:
    """Both topic files as one, and the provenance qrels: the inputs of bench/answers.py and `cast eval`."""
    import json

    from cast.formats.topics import provenance_qrels

    args.out.mkdir(parents=True, exist_ok=True)
    topics = [item for path in args.topics for item in json.loads(path.read_text(encoding="utf-8"))]
    (args.out / "topics.json").write_text(json.dumps(topics, ensure_ascii=False), encoding="utf-8")
    qrels = provenance_qrels(load_dev(args.topics))
    lines = [
        f"{qid} 0 {passage_id} {grade}\n"
        for qid, judged in qrels.items()
        for passage_id, grade in judged.items()
    ]
    (args.out / "provenance.qrels").write_text("".join(lines), encoding="utf-8")
    print(
        f"wrote {args.out / 'topics.json'} ({len(topics)} conversations) and {args.out / 'provenance.qrels'}"
    )
    return 0


def _row(row: dict[str, float]) -> str:
    return "".join(f"{v:9.4f}" for v in row.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler, help_text in (
        ("ptkb", command_ptkb, "PTKB statement ranking per selector"),
        ("retrieval", command_retrieval, "MRR, nDCG@3, R@100 per query formulation"),
        ("files", command_files, "write the dev topics as one file and their provenance qrels"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument(
            "--index",
            type=existing_path,
            default=IKAT_INDEX,
            help="the iKAT 2023 dev index (default: %(default)s)",
        )
        sub.add_argument("--topics", nargs="+", type=existing_path, default=list(DEV_TOPICS))
        sub.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
        sub.set_defaults(func=handler)
        if name == "ptkb":
            sub.add_argument("--nist", type=existing_path, default=str(NIST_PTKB_QRELS))
            sub.add_argument("--selectors", nargs="+", default=["all", "bm25", "biencoder"])
        elif name == "retrieval":
            sub.add_argument(
                "--queries",
                nargs="+",
                default=["raw", "hqe", "hqe+bm25", "hqe+biencoder", "manual:fallback=raw"],
            )
            sub.add_argument("--no-rerank", action="store_true", help="LMD alone only")
        else:
            sub.add_argument("--out", type=Path, required=True, help="output folder")
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(run(main))
