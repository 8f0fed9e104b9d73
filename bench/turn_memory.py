"""Memory against the number of turns answered: the resident memory of ``cast run``'s process after 100, 1,000 and
10,000 turns.

The turns are the raw utterances of ``--topics`` repeated in order (each repeat a turn of its own qid), shaped as
``--conversations`` conversations of ``--turns`` turns in all (1: one conversation of every turn; 1,000 with
10,000 turns: 1,000 conversations of 10). They are answered as ``cast run`` answers them, in this process
(:func:`cast.formats.outputs.write_outputs` over a local runner, writing the run and answers files to ``--work``),
with the stages that cost least per turn: the raw utterance, Lucene LMD at depth ``--k``, no re-ranking or entity
linking, the first-stage order, top-k trim answers. The resident memory (``/proc/self/statm``) is printed as each
checkpoint's turn is written, with the part of it that the JVM has committed to its heap (``Runtime.totalMemory``)
and the time taken so far.

    .venv/bin/python bench/turn_memory.py --index INDEX [--turns 10000] [--conversations 1] [--k 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from cast.benchmark.scripts import (
    DEV_2022_TOPICS,
    existing_path,
    load_average,
    run,
)

CHEAP_STAGES = (
    "rewriter.name=raw",
    "reranker.name=none",
    "linker.name=none",
    "selector.name=o",
    "summarizer.name=topk_trim",
)


def resident_mb() -> float:
    """This process's resident memory now, in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def jvm_heap_mb() -> float:
    """The JVM's committed heap now, in MB."""
    from jnius import autoclass

    return autoclass("java.lang.Runtime").getRuntime().totalMemory() / 1e6


def repeated_topics(source: Path, turns: int, conversations: int) -> list[dict]:
    """``conversations`` sample conversations of ``turns`` turns in all, the utterances of ``source`` in turn."""
    from cast.formats.topics import load_topics

    utterances = list(dict.fromkeys(t.utterance for c in load_topics(source) for t in c.turns))
    per, extra = divmod(turns, conversations)
    topics, taken = [], 0
    for number in range(conversations):
        size = per + (number < extra)
        texts = [utterances[(taken + i) % len(utterances)] for i in range(size)]
        topics.append({"topic_id": f"m{number}", "turns": [{"utterance": text} for text in texts]})
        taken += size
    return topics


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--index",
        type=existing_path,
        default=os.environ.get("CAST_POOLED_INDEX"),
        required=not os.environ.get("CAST_POOLED_INDEX"),
        help="the Lucene index searched (default: $CAST_POOLED_INDEX)",
    )
    parser.add_argument(
        "--topics", type=existing_path, default=DEV_2022_TOPICS, help="where the utterances come from"
    )
    parser.add_argument("--turns", type=int, default=10_000, help="turns answered in all")
    parser.add_argument(
        "--conversations", type=int, default=1, help="conversations the turns are shared among"
    )
    parser.add_argument("--k", type=int, default=100, help="passages retrieved per turn (first_stage.k)")
    parser.add_argument(
        "--checkpoints", type=int, nargs="+", default=[100, 1_000, 10_000], help="turns after which to print"
    )
    parser.add_argument(
        "--work", type=Path, help="where the outputs and the cache go (default: a temporary folder)"
    )
    args = parser.parse_args()
    if not 1 <= args.conversations <= args.turns:
        parser.error("--conversations must be between 1 and --turns")

    from cast.conversation.runner import open_runner
    from cast.core.config import load_config
    from cast.formats.outputs import RunOutputs, write_outputs
    from cast.formats.topics import load_topics, topics_digest

    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        topics_path = work / "topics.json"
        topics_path.write_text(json.dumps(repeated_topics(args.topics, args.turns, args.conversations)))
        conversations = load_topics(topics_path)
        config = load_config(
            "offline",
            [*CHEAP_STAGES, f"first_stage.k={args.k}", f"index={args.index}", f"cache_dir={work / 'cache'}"],
        )
        outputs = RunOutputs(work / "memory", "memory", overwrite=True)
        checkpoints = sorted(c for c in args.checkpoints if c <= args.turns)
        print(
            f"{args.turns:,} turns in {args.conversations:,} conversation(s), first_stage.k={args.k}, "
            f"{load_average()}"
        )
        print("| turns answered | resident MB | JVM heap MB | seconds |\n| ---: | ---: | ---: | ---: |")
        with outputs.locked(), open_runner(config) as runner:
            print(f"| 0 (pipeline loaded) | {resident_mb():.0f} | | 0 |", flush=True)
            started, written = time.perf_counter(), 0

            def answer(done: dict, write: object) -> None:
                def counted(result: object) -> None:
                    nonlocal written
                    write(result)  # type: ignore[operator]
                    written += 1
                    if written in checkpoints:
                        seconds = time.perf_counter() - started
                        print(
                            f"| {written:,} | {resident_mb():.0f} | {jvm_heap_mb():.0f} | {seconds:.0f} |",
                            flush=True,
                        )

                runner.run(conversations, done=done, on_result=counted)

            described = {**runner.describe(), "topics": topics_digest(conversations)}
            write_outputs(outputs, described, conversations, answer, overwrite=True)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
