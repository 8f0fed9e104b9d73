"""Latency, tokens and cache hits per turn of the LLM stages against any OpenAI-compatible server.

For each turn of the topics (CAsT 2022 dev by default) the LLM rewriter rewrites the utterance after the
conversation so far (the topics' responses as earlier responses), and the LLM summarizer answers it from the
turn's provenance passages whose text is given (``--passages``; turns without any are not answered), so that no
index is needed. Each pass prints a line per turn (seconds, prompt and completion tokens, whether the answer came
from the cache) and a summary; a second pass (``--passes 2``) shows what the cache saves.

    .venv/bin/python bench/llm.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    .venv/bin/python bench/llm.py --base-url URL --model M --turns 20 --passes 2 --cache-dir /tmp/llm-bench

``--engine SHAPE`` times a real engine without a checkpoint: a chat model of a published shape (``smollm2-135m``,
``qwen2.5-7b``, ``llama-3.1-8b``; ``tiny`` for a CPU) with random weights and a word tokenizer over the topics' words is written to
a temporary folder and served by ``transformers serve`` (``cast.infra.engine.ServedModel``), which the turns then ask.
Random weights never stop early, so every completion runs to its ``max_tokens``::

    python bench/llm.py --engine qwen2.5-7b --engine-device cuda --turns 16 --concurrency 1 16
    python bench/llm.py --engine smollm2-135m --engine-device cuda --engine-continuous-batching --concurrency 1 16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from cast.benchmark.scripts import (
    DEV_2022_PASSAGES,
    DEV_2022_TOPICS,
    existing_path,
    load_average,
    require_paths,
    run,
)


def median(values: list[float], share: float = 0.5) -> str:
    """The ``share`` quantile of ``values`` (nearest rank), as text ("-" for none)."""
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(share * len(ordered)))]:.3f}" if ordered else "-"


def main(argv: list[str] | None = None) -> int:
    from cast.testing import CHAT_SHAPES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the server's API root, e.g. http://localhost:8000/v1")
    parser.add_argument("--model", help="the model's name as the server knows it")
    parser.add_argument(
        "--engine",
        choices=list(CHAT_SHAPES),
        help="instead of --base-url and --model: serve a random-weight chat model of this shape and time it",
    )
    parser.add_argument("--engine-device", default="cpu", help="where the engine runs (default cpu)")
    parser.add_argument(
        "--engine-dtype",
        default="auto",
        help="the engine model's dtype (auto: float32 on a CPU, else bfloat16)",
    )
    parser.add_argument(
        "--engine-continuous-batching",
        action="store_true",
        help="serve with transformers' continuous batching (requests in flight decoded together)",
    )
    parser.add_argument("--api-key-env", help="the environment variable holding the server's API key")
    # Path defaults, checked after parsing (require_paths): --help needs no data folder.
    parser.add_argument("--topics", type=existing_path, default=DEV_2022_TOPICS)
    parser.add_argument("--passages", type=existing_path, default=DEV_2022_PASSAGES)
    parser.add_argument("--turns", type=int, default=0, help="the first N turns only (0: all)")
    parser.add_argument(
        "--passes", type=int, default=1, help="passes over the turns (later ones hit the cache)"
    )
    parser.add_argument("--cache-dir", default=None, help="the answers cache (default: none, in memory)")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1],
        help="turns asked together, their requests in flight at once (default 1; several: each in turn, with a "
        "cache of its own)",
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    require_paths(parser, args, "topics", "passages")
    if not (args.engine or (args.base_url and args.model)):
        parser.error("give --base-url and --model, or --engine SHAPE")

    from cast.formats.topics import load_topics
    from cast.index.collections import read_passages

    conversations = load_topics(args.topics)
    passages = {p.id: p for p in read_passages([args.passages])}
    if args.engine:
        return time_engine(args, conversations, passages)
    return time_each_concurrency(args, args.base_url, args.model, conversations, passages)


def time_each_concurrency(
    args: argparse.Namespace, base_url: str, model: str, conversations: list[Any], passages: dict[str, Any]
) -> int:
    for concurrency in args.concurrency:
        # Several values: each its own cache, so that a later one is not answered from an earlier one's.
        own = args.cache_dir and len(args.concurrency) > 1
        cache_dir = f"{args.cache_dir}/concurrency-{concurrency}" if own else args.cache_dir
        time_turns(args, base_url, model, concurrency, cache_dir, conversations, passages)
    return 0


def time_engine(args: argparse.Namespace, conversations: list[Any], passages: dict[str, Any]) -> int:
    """:func:`time_turns` against ``transformers serve`` on a random-weight chat model of ``args.engine``."""
    import re
    import tempfile

    from cast.infra.engine import ServedModel
    from cast.testing import chat_model

    words = sorted(
        {
            word
            for topic in conversations
            for turn in topic.turns
            for word in re.findall(r"[a-z]+", f"{turn.utterance} {turn.response or ''}".lower())
        }
    )
    dtype = (
        args.engine_dtype
        if args.engine_dtype != "auto"
        else "float32"
        if args.engine_device == "cpu"
        else "bfloat16"
    )
    with tempfile.TemporaryDirectory(prefix="cast-engine-") as folder:
        start = time.perf_counter()
        model = chat_model(Path(folder) / "model", words, args.engine, dtype, args.engine_device)
        engine = ServedModel(
            model,
            Path(folder) / "home",
            args.engine_device,
            continuous_batching=args.engine_continuous_batching,
        )
        try:
            engine.wait()
            print(f"{args.engine} ({dtype}, random weights, {len(words):,}-word tokenizer) served on "
                  f"{args.engine_device} by transformers serve in {time.perf_counter() - start:.0f} s")  # fmt: skip
            return time_each_concurrency(args, engine.url, str(model), conversations, passages)
        finally:
            engine.stop()


def time_turns(
    args: argparse.Namespace,
    base_url: str,
    model: str,
    concurrency: int,
    cache_dir: str | None,
    conversations: list[Any],
    passages: dict[str, Any],
) -> None:
    """Each turn's rewrite and answer asked of ``model`` at ``base_url``, ``concurrency`` turns at a time,
    ``args.passes`` times, with a line per call and a summary per pass."""
    from cast.conversation.walker import turn_histories
    from cast.core.records import ScoredPassage, Selection
    from cast.core.registry import stage_class
    from cast.infra.resources import Resources

    resources = Resources({"cache_dir": cache_dir})
    server: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key_env": args.api_key_env,
        "timeout": args.timeout,
        "concurrency": concurrency,
    }
    rewriter = stage_class("rewriter", "llm").from_config(server, resources)
    summarizer = stage_class("summarizer", "llm").from_config(server, resources)
    client = rewriter.client  # one server: the stages share it
    # Each turn once, in conversation order, after a history of the earlier turns' manual rewrites (the oracle's:
    # the LLM's own rewrites would make the timings depend on its answers).
    manual = stage_class("rewriter", "manual").from_config({"fallback": "raw"}, resources)
    walk = turn_histories(manual, conversations)
    if args.turns:
        walk = walk[: args.turns]
    print(f"{len(walk)} turns, {model} at {base_url}, concurrency {concurrency}, {load_average()}")
    for number in range(1, args.passes + 1):
        print(
            f"\npass {number}\n| qid | stage | s | prompt tokens | completion tokens | cached |\n|---|---|---|---|---|---|"
        )
        rows = []
        # --concurrency turns at a time, each stage's requests side by side: a request's latency is its batch's.
        for first in range(0, len(walk), concurrency):
            batch = walk[first : first + concurrency]
            answerable = [
                (turn, [passages[i] for i in turn.response_ids if i in passages]) for _, turn in batch
            ]
            answerable = [(turn, chosen) for turn, chosen in answerable if chosen]
            for stage, turns in (
                ("rewrite", [turn for _, turn in batch]),
                ("answer", [t for t, _ in answerable]),
            ):
                if not turns:
                    continue
                before = client.counters()
                start = time.perf_counter()
                if stage == "rewrite":
                    usages = [r.inputs["usage"] for r in rewriter.rewrite_batch(batch)]
                else:
                    usages = [
                        a.settings["usage"]
                        for a in summarizer.summarize_batch(
                            [
                                (
                                    turn.manual_rewrite or turn.utterance,
                                    Selection(
                                        tuple(ScoredPassage(p, 1.0) for p in chosen), method="provenance"
                                    ),
                                )
                                for turn, chosen in answerable
                            ]
                        )
                    ]
                seconds = time.perf_counter() - start
                cached = client.counters()["cache_hits"] - before["cache_hits"] == len(turns)
                for turn, usage in zip(turns, usages, strict=True):
                    rows.append((stage, seconds, usage, cached, first))
                    print(
                        f"| {turn.qid} | {stage} | {seconds:.3f} | {usage['prompt_tokens']} | "
                        f"{usage['completion_tokens']} | {'yes' if cached else 'no'} |"
                    )
        for stage in ("rewrite", "answer"):
            mine = [r for r in rows if r[0] == stage]
            asked = [r for r in mine if not r[3]]
            if not mine:
                continue
            times = [r[1] for r in asked]
            hits = [r[1] for r in mine if r[3]]
            completion = sum(r[2]["completion_tokens"] or 0 for r in asked)
            wall = sum({r[4]: r[1] for r in asked}.values())  # each batch's time once
            rate = f"{completion / wall:.1f}" if wall else "-"
            print(
                f"{stage}: {len(mine)} calls, mean prompt "
                f"{statistics.mean(r[2]['prompt_tokens'] or 0 for r in mine):.0f} tokens; {len(asked)} asked: "
                f"median {median(times)} s, p90 {median(times, 0.9)} s, "
                f"{rate} completion tokens/s; "
                f"{len(hits)} from the cache: median {median(hits)} s"
            )
    print(f"\nclient: {client.counters()}")


if __name__ == "__main__":
    sys.exit(run(main))
