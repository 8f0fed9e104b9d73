"""Latency, tokens and cache hits per turn of the LLM stages against any OpenAI-compatible server.

For each turn of the topics (CAsT 2022 dev by default) the LLM rewriter rewrites the utterance after the
conversation so far (the topics' responses as earlier responses), and the LLM summarizer answers it from the
turn's provenance passages whose text is given (``--passages``; turns without any are not answered), so that no
index is needed. Each pass prints a line per turn (seconds, prompt and completion tokens, whether the answer came
from the cache) and a summary; a second pass (``--passes 2``) shows what the cache saves.

    .venv/bin/python bench/llm.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    .venv/bin/python bench/llm.py --base-url URL --model M --turns 20 --passes 2 --cache-dir /tmp/llm-bench
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DEV_2022_PASSAGES, DEV_2022_TOPICS, existing_path, load_average, run  # noqa: E402


def median(values: list[float], share: float = 0.5) -> str:
    """The ``share`` quantile of ``values`` (nearest rank), as text ("-" for none)."""
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(share * len(ordered)))]:.3f}" if ordered else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base-url", required=True, help="the server's API root, e.g. http://localhost:8000/v1"
    )
    parser.add_argument("--model", required=True, help="the model's name as the server knows it")
    parser.add_argument("--api-key-env", help="the environment variable holding the server's API key")
    parser.add_argument("--topics", type=existing_path, default=str(DEV_2022_TOPICS))
    parser.add_argument("--passages", type=existing_path, default=str(DEV_2022_PASSAGES))
    parser.add_argument("--turns", type=int, default=0, help="the first N turns only (0: all)")
    parser.add_argument(
        "--passes", type=int, default=1, help="passes over the turns (later ones hit the cache)"
    )
    parser.add_argument("--cache-dir", default=None, help="the answers cache (default: none, in memory)")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight (1: one turn at a time)"
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    from cast.conversation.walker import turn_histories
    from cast.core.records import ScoredPassage, Selection
    from cast.core.registry import stage_class
    from cast.core.resources import Resources
    from cast.formats.topics import load_topics
    from cast.index.collections import read_passages

    resources = Resources({"cache_dir": args.cache_dir})
    server: dict[str, Any] = {
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "timeout": args.timeout,
        "concurrency": args.concurrency,
    }
    rewriter = stage_class("rewriter", "llm").from_config(server, resources)
    summarizer = stage_class("summarizer", "llm").from_config(server, resources)
    client = rewriter.client  # one server: the stages share it
    passages = {p.id: p for p in read_passages([args.passages])}
    # Each turn once, in conversation order, after a history of the earlier turns' manual rewrites (the oracle's:
    # the LLM's own rewrites would make the timings depend on its answers).
    manual = stage_class("rewriter", "manual").from_config({"fallback": "raw"}, resources)
    walk = turn_histories(manual, load_topics(args.topics))
    if args.turns:
        walk = walk[: args.turns]
    print(
        f"{len(walk)} turns, {args.model} at {args.base_url}, concurrency {args.concurrency}, {load_average()}"
    )
    for number in range(1, args.passes + 1):
        print(
            f"\npass {number}\n| qid | stage | s | prompt tokens | completion tokens | cached |\n|---|---|---|---|---|---|"
        )
        rows = []
        for history, turn in walk:
            for stage in ("rewrite", "answer"):
                chosen = [passages[i] for i in turn.response_ids if i in passages]
                if stage == "answer" and not chosen:
                    continue
                before = client.counters()
                start = time.perf_counter()
                if stage == "rewrite":
                    usage = rewriter.rewrite(history, turn).inputs["usage"]
                else:
                    selection = Selection(tuple(ScoredPassage(p, 1.0) for p in chosen), method="provenance")
                    question = turn.manual_rewrite or turn.utterance
                    usage = summarizer.summarize(question, selection).settings["usage"]
                seconds = time.perf_counter() - start
                cached = client.counters()["cache_hits"] > before["cache_hits"]
                rows.append((stage, seconds, usage, cached))
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
            rate = f"{completion / sum(times):.1f}" if sum(times) else "-"
            print(
                f"{stage}: {len(mine)} calls, mean prompt "
                f"{statistics.mean(r[2]['prompt_tokens'] or 0 for r in mine):.0f} tokens; {len(asked)} asked: "
                f"median {median(times)} s, p90 {median(times, 0.9)} s, "
                f"{rate} completion tokens/s; "
                f"{len(hits)} from the cache: median {median(hits)} s"
            )
    print(f"\nclient: {client.counters()}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
