"""Per-turn wall time of the first three stages (rewrite, first stage, re-rank).

Two modes:

``offline`` (default): the offline profile (HQE, LMD over the index, bi-encoder re-ranking of the top
``--depth``) on the CAsT 2022 dev turns, one turn at a time, on ``--threads`` CPU threads. The re-ranker's
passage-embedding cache starts empty ("cold"), then the same turns run again ("warm": passages already seen are
not encoded again, as in a rerun or a later turn that retrieves them again)::

    .venv/bin/python bench/latency.py offline --turns 30 --threads 2

Passage embeddings precomputed with ``cast index embed`` are read from the store beside the index when there is
one (``--embeddings auto``, the offline config's default; the "cold" pass then encodes only the queries and the
passages missing from the store); ``--embeddings none`` times encoding at query time, ``--embeddings PATH`` a
given store::

    .venv/bin/python bench/latency.py offline --index /tmp/demo --embeddings none

``paper-shapes``: the paper profile's models with random weights and the published shapes (T5-base for the
rewriter, BERT-large for monoBERT), saved to a temporary folder with a synthetic 30k-word tokenizer and run
through the real stages (:class:`cast.rewrite.t5.T5Rewriter`, :class:`cast.rank.rerank.MonoBERTReranker`). Needs
only torch and transformers (no index, no download), so it runs on a bare GPU machine::

    .venv/bin/python bench/latency.py paper-shapes --device cpu --threads 2 --turns 2
    .venv/bin/python bench/latency.py paper-shapes --device cuda --turns 20

Timings on a GPU synchronise CUDA before reading the clock; the first ``--warmup`` turns are not counted.
``--decoding static|compiled`` runs the T5 rewriter with a fixed-shape KV cache (and CUDA graphs), as
``rewriter.decoding`` does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cast.benchmark.scripts import (
    DEFAULT_INDEX,
    DEV_2022_TOPICS,
    load_average,
    run,
)


def summary(name: str, seconds: Sequence[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"{name:<12} mean {statistics.mean(seconds):7.3f} s   median {statistics.median(seconds):7.3f} s"
        f"   p90 {p90:7.3f} s   (n={len(seconds)})"
    )


def clock(device: str) -> Callable[[], float]:
    """``time.perf_counter`` that first waits for queued CUDA work, so GPU stages are timed fully."""
    if device.startswith("cuda"):
        import torch

        def synced() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()

        return synced
    return time.perf_counter


def time_turns(
    stages: dict[str, Callable[[Any], Any]], turns: Sequence[Any], now: Callable[[], float]
) -> dict:
    """Run the stages in order on each turn (each stage gets the previous one's output); seconds per stage."""
    seconds: dict[str, list[float]] = {name: [] for name in stages}
    for turn in turns:
        value = turn
        for name, stage in stages.items():
            start = now()
            value = stage(value)
            seconds[name].append(now() - start)
    seconds["total"] = [sum(parts) for parts in zip(*seconds.values(), strict=True)]
    return seconds


def report(title: str, seconds: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    for name, values in seconds.items():
        print("  " + summary(name, values))


def command_offline(args: argparse.Namespace) -> int:
    import torch

    from cast.conversation.walker import turn_histories
    from cast.core.config import load_config
    from cast.core.registry import build_stage
    from cast.formats.topics import load_topics
    from cast.infra.resources import Resources

    torch.set_num_threads(args.threads)
    config = load_config("offline", [f"index={args.index}", "device=cpu", *args.overrides])
    config["cache_dir"] = None  # an in-memory cache: the cold pass really starts cold
    resources = Resources(config)
    rewriter = build_stage("rewriter", config["rewriter"], resources)
    first_stage = build_stage("first_stage", config["first_stage"], resources)
    reranker = build_stage(
        "reranker", {**config["reranker"], "depth": args.depth, "embeddings": args.embeddings}, resources
    )
    first_stage.search("warm up the searcher")

    # Each turn once, with the history the pipeline's rewrite step gives it (earlier turns' rewrites).
    items = turn_histories(rewriter, load_topics(args.topics))[: args.turns]

    state: dict[str, Any] = {}

    def rewrite(item: tuple) -> str:
        return rewriter.rewrite(*item).query

    def search(query: str) -> tuple[str, list]:
        return query, first_stage.search(query)

    def rerank(searched: tuple[str, list]) -> list:
        query, ranking = searched
        state["last"] = reranker.rerank(query, ranking[: args.depth])
        return state["last"]

    stages = {"rewrite": rewrite, "first_stage": search, "rerank": rerank}
    print(f"offline profile: {rewriter.describe()} / {first_stage.describe()} / {reranker.describe()}")
    print(f"sentence encoder: {reranker.encoder.settings}; {load_average()}")
    print(
        f"{len(items)} turns of {args.topics.name}, {args.threads} torch threads, re-rank depth {args.depth}"
    )
    store = reranker.store
    print(
        "precomputed passage embeddings: "
        + (f"{store.manifest['count']:,} at {store.path}" if store else "none (encoded at query time)")
    )
    report("cold embedding cache", time_turns(stages, items, time.perf_counter))
    report("warm embedding cache (same turns again)", time_turns(stages, items, time.perf_counter))
    print(load_average())
    return 0


SYNTHETIC_VOCAB = 30000  # below both models' vocabularies (T5 32128, BERT 30522)


def synthetic_tokenizer(folder: Path, family: str) -> Any:
    """A word-level tokenizer over ``w0 .. w29995`` with T5's or BERT's special tokens (for timing only)."""
    from cast.testing import word_tokenizer

    return word_tokenizer(folder, family, (f"w{i}" for i in range(SYNTHETIC_VOCAB - 4)))


def random_paper_models(folder: Path) -> tuple[Path, Path]:
    """Random T5-base and BERT-large (2 labels) checkpoints with synthetic tokenizers, saved under ``folder``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from cast.testing import published_shape_model

    torch.manual_seed(0)
    t5, bert = folder / "t5-base-random", folder / "bert-large-random"
    synthetic_tokenizer(t5, "t5")
    published_shape_model("t5-base").save_pretrained(str(t5))
    synthetic_tokenizer(bert, "bert")
    # BERT-large: 24 layers, hidden 1024, 16 heads, intermediate 4096 (monoBERT's shape).
    BertForSequenceClassification(
        BertConfig(
            vocab_size=30522,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
        )
    ).save_pretrained(str(bert))
    return t5, bert


def synthetic_text(rng: Any, words: int) -> str:
    return " ".join(f"w{rng.randrange(SYNTHETIC_VOCAB - 4)}" for _ in range(words))


def command_paper_shapes(args: argparse.Namespace) -> int:
    import random

    import torch

    from cast.core.records import Passage, PastTurn, ScoredPassage, Turn
    from cast.core.registry import build_stage
    from cast.infra.resources import Resources

    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    resources = Resources({"device": args.device, "cache_dir": None})
    with tempfile.TemporaryDirectory(prefix="cast-latency-") as tmp:
        t5, bert = random_paper_models(Path(tmp))
        rewriter = build_stage(
            "rewriter",
            {
                "name": "t5",
                "model": str(t5),
                "input_format": "paper",
                "num_beams": args.beams,
                "max_output_length": args.output_tokens + 1,
                "dtype": args.dtype,
                "decoding": args.decoding,
            },
            resources,
        )
        reranker = build_stage(
            "reranker",
            {
                "name": "monobert",
                "model": str(bert),
                "depth": args.depth,
                "batch_size": args.batch_size,
                "dtype": args.dtype,
            },
            resources,
        )
    # A random model may stop at any length: generate exactly --output-tokens tokens, a typical rewrite's length.
    rewriter.model.generation_config.min_new_tokens = args.output_tokens

    items = []
    for n in range(args.warmup + args.turns):  # the first --warmup turns are not timed
        history = [
            PastTurn(
                turn=Turn(
                    qid=f"t{n}_{j}", topic_id=f"t{n}", turn_id=str(j), utterance=synthetic_text(rng, 12)
                ),
                query="",
                top_passage=Passage(id=f"p{j}", text=synthetic_text(rng, args.passage_words)),
            )
            for j in range(1, 4)
        ]
        turn = Turn(qid=f"t{n}_4", topic_id=f"t{n}", turn_id="4", utterance=synthetic_text(rng, 12))
        ranking = [
            ScoredPassage(Passage(id=f"d{i}", text=synthetic_text(rng, args.passage_words)), 0.0, 0.0, i + 1)
            for i in range(args.depth)
        ]
        items.append(((history, turn), ranking))

    def rewrite(item: tuple) -> tuple:
        (history, turn), ranking = item
        return rewriter.rewrite(history, turn).query, ranking

    def rerank(rewritten: tuple) -> list:
        query, ranking = rewritten
        return reranker.rerank(query, ranking)

    now = clock(args.device)
    time_turns({"rewrite": rewrite, "rerank": rerank}, items[: args.warmup], now)
    seconds = time_turns({"rewrite": rewrite, "rerank": rerank}, items[args.warmup :], now)
    device = (
        torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, {args.threads} threads"
    )
    print(
        f"paper shapes, random weights: T5-base rewriter (paper input format, {args.beams} beams, "
        f"{args.output_tokens} output tokens, {args.decoding} decoding) + BERT-large monoBERT over {args.depth} passages of "
        f"{args.passage_words} words (batch {args.batch_size}, max 512 tokens), dtype {args.dtype}, on {device}"
    )
    report("per turn", seconds)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    offline = commands.add_parser("offline", help="the offline profile on CPU (needs the index)")
    offline.add_argument(
        "--topics",
        type=Path,
        default=DEV_2022_TOPICS,
        help="CAsT topics whose turns are timed (default: %(default)s)",
    )
    offline.add_argument(
        "--index",
        type=Path,
        default=Path(DEFAULT_INDEX),
        help="Krovetz index of the topics' collection (default: %(default)s)",
    )
    offline.add_argument("--turns", type=int, default=30, help="how many turns to time (default 30)")
    offline.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    offline.add_argument("--depth", type=int, default=100, help="re-rank depth (default 100)")
    offline.add_argument(
        "--embeddings",
        default="auto",
        help="precomputed passage embeddings: auto (the store beside the index, if any), none, or a store's path",
    )
    offline.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    offline.set_defaults(func=command_offline)
    paper = commands.add_parser("paper-shapes", help="random T5-base + BERT-large through the real stages")
    paper.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    paper.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    paper.add_argument("--turns", type=int, default=5, help="turns to time after the warm-up (default 5)")
    paper.add_argument(
        "--warmup", type=int, default=2, help="turns run first and not timed (default 2: CUDA graphs record)"
    )
    paper.add_argument(
        "--decoding",
        default="plain",
        choices=["plain", "static", "compiled"],
        help="the T5 rewriter's beam search (cast.infra.decoding.BeamDecoder; default plain)",
    )
    paper.add_argument("--depth", type=int, default=100, help="passages re-ranked per turn (default 100)")
    paper.add_argument("--passage-words", type=int, default=100, help="words per passage (default 100)")
    paper.add_argument(
        "--batch-size", type=int, default=100, help="monoBERT pairs per forward pass (default 100)"
    )
    paper.add_argument("--beams", type=int, default=10, help="T5 beam width (default 10, castorini's)")
    paper.add_argument(
        "--output-tokens", type=int, default=20, help="tokens generated per rewrite (default 20)"
    )
    paper.add_argument(
        "--dtype", default="auto", help="auto (fp32 CPU; bf16 T5 / fp16 BERT on GPU), float32, ..."
    )
    paper.set_defaults(func=command_paper_shapes)
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["offline", *(argv or sys.argv[1:])])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(run(main))
