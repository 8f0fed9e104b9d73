"""Entity linking on ConEL-2 val beside the published peers, and the linkers' speed.

Speed: ms per user turn, and a CAsT turn's passages linked as the pipeline links them: the CAsT 2022 dev
provenance passages in batches of ``--per-turn`` (10), no cache, after one warm-up batch (which starts the
linker's helper processes, timed apart as "start"). Reported: the median ms per batch in wall-clock time and
passages linked per second, wall-clock and CPU of this process (the helpers' CPU is not in the latter; on a
shared machine wall-clock figures rise with the load).

Scores follow the dataset's published way (cast/formats/conel.py): a link counts when dialogue, turn, mention without
a leading article and entity all match. Each user turn is linked with the dialogue's earlier turns as context.

    python bench/entity_linking.py --linkers wikipedia dictionary --index indexes/cast2022-dev

The wikipedia linker's decision is trained by ``cast train entity-linker`` (on ConEL-2 train, its threshold
chosen on val); ``--model`` scores another model file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from cast.benchmark.scripts import DATA, DEFAULT_INDEX, DEV_2022_PASSAGES, existing_path, run

CONEL = DATA / "conel"
PEERS = ("CREL", "WAT", "Tagme", "GENRE", "REL")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--val-data", type=existing_path, default=CONEL / "ConEL22_EL_Val.json")
    parser.add_argument("--peers", type=existing_path, default=CONEL / "peer-runs-val")
    parser.add_argument(
        "--index", default=DEFAULT_INDEX, help="index whose entity resources (.entities) to use"
    )
    parser.add_argument("--kb", default=None, help="the knowledge base file (default: the linker's default)")
    parser.add_argument("--linkers", nargs="+", default=["wikipedia"], help="project linkers to score")
    parser.add_argument("--model", type=Path, default=None, help="the wikipedia linker's model file to score")
    parser.add_argument(
        "--passages", type=existing_path, default=DEV_2022_PASSAGES, help="passages for speed"
    )
    parser.add_argument("--per-turn", type=int, default=10, help="passages linked per batch (a turn's)")
    parser.add_argument("--turns", type=int, default=100, help="batches timed (after one warm-up batch)")
    parser.add_argument(
        "--processes", type=int, default=None, help="the wikipedia linker's processes (default: its own)"
    )
    args = parser.parse_args()

    from cast.core.config import load_config
    from cast.core.registry import shared_stage
    from cast.formats.conel import gold_links, read_dialogues, read_links, run_links, score, user_turns
    from cast.formats.textfiles import json_lines
    from cast.infra.resources import Resources

    val = user_turns(read_dialogues(args.val_data))
    gold = gold_links([[turn for turn, _ in val]])
    print(f"ConEL-2 val: {len(val)} user turns, {len(gold)} gold links")
    print(
        f"{'linker':<22} {'P':>6} {'R':>6} {'F1':>6} {'ms/query':>9} {'CPU ms':>7} {'start s':>8} "
        f"{'ms/turn':>8} {'passages/s':>11} {'CPU':>6}"
    )
    texts = [record["contents"] for _, record in json_lines(args.passages)]
    for name in args.linkers:
        settings = {"name": name}
        if name == "wikipedia":
            chosen = (
                ("kb_path", args.kb),
                ("model_path", args.model and str(args.model)),
                ("processes", args.processes),
            )
            settings.update({k: v for k, v in chosen if v})
        config = {**load_config("offline", [f"index={args.index}"]), "linker": settings, "cache_dir": None}
        linker = shared_stage("linker", Resources(config))
        started, cpu = time.perf_counter(), time.process_time()
        # Each user turn after the dialogue's earlier turns, for linkers that read the conversation.
        linked = linker.link_batch([t.utterance for t, _ in val], kind="query", contexts=[c for _, c in val])
        per_query = (time.perf_counter() - started) / len(val) * 1000
        cpu_per_query = (time.process_time() - cpu) / len(val) * 1000
        turns = [texts[i : i + args.per_turn] for i in range(0, len(texts), args.per_turn)][: args.turns + 1]
        started = time.perf_counter()
        linker.link_batch(turns[0], kind="passage")
        start = time.perf_counter() - started
        walls, cpus = [], []
        for passages in turns[1:]:
            started, cpu = time.perf_counter(), time.process_time()
            linker.link_batch(passages, kind="passage")
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        linked_passages = sum(len(passages) for passages in turns[1:])
        p, r, f1, *_ = score(run_links(val, linked), gold)
        print(
            f"{name:<22} {p:6.3f} {r:6.3f} {f1:6.3f} {per_query:9.1f} {cpu_per_query:7.1f} {start:8.1f} "
            f"{statistics.median(walls) * 1000:8.0f} {linked_passages / sum(walls):11.1f} "
            f"{linked_passages / sum(cpus):6.1f}"
        )
    for peer in PEERS:
        path = args.peers / f"{peer}.json"
        if path.is_file():
            p, r, f1, *_ = score(read_links(path), gold)
            print(f"{peer + ' (published run)':<22} {p:6.3f} {r:6.3f} {f1:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
