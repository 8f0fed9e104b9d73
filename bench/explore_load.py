"""Benchmark of the explorer under a burst of requests for uncached turns.

Serves the explorer on 127.0.0.1 over an index and a topics file, sends ``--burst`` concurrent
``POST /api/answer`` requests for distinct uncached turns (the first turns of the conversations, each with its own
``words`` setting), and meanwhile asks ``GET /api/health`` every 0.2 s. Prints the health latencies (median and
largest), the statuses of the burst and its wall-clock time.

    .venv/bin/python bench/explore_load.py --index indexes/cast2022-dev --burst 45
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import threading
import time
from collections import Counter

from cast.benchmark.scripts import DEFAULT_INDEX, DEV_2022_TOPICS, existing_path, run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--index", type=existing_path, default=DEFAULT_INDEX, help=f"(default: {DEFAULT_INDEX})"
    )
    parser.add_argument(
        "--topics",
        type=existing_path,
        default=str(DEV_2022_TOPICS),
        help="(default: the CAsT 2022 dev topics)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="offline config overrides"
    )
    parser.add_argument(
        "--burst", type=int, default=45, help="concurrent requests (default: 45, the audit's)"
    )
    return parser.parse_args()


def main() -> int:
    import httpx

    from cast.core.config import load_config
    from cast.explore.api import create_app
    from cast.explore.engine import Explorer
    from cast.explore.server import BackgroundServer
    from cast.formats.topics import load_topics

    args = parse_args()
    config = load_config("offline", [f"index={args.index}", *args.set])
    explorer = Explorer(config, load_topics(args.topics), time_limit=120)
    # An explorer without a bound on pending turns (older code) is measured by the same script.
    bounded = "max_pending" in inspect.signature(Explorer).parameters
    explorer.warm_up()
    conversations = explorer.conversations.ids()
    with (
        BackgroundServer(create_app(explorer)) as server,
        httpx.Client(base_url=server.url, timeout=300) as client,
    ):
        statuses: Counter[int] = Counter()

        def ask(n: int) -> None:
            body = {
                "conversation_id": conversations[n % len(conversations)],
                "turn": 1,
                "params": {"words": 20 + n},
            }
            statuses[client.post("api/answer", json=body).status_code] += 1

        askers = [threading.Thread(target=ask, args=(n,)) for n in range(args.burst)]
        started = time.perf_counter()
        for asker in askers:
            asker.start()
        latencies = []
        while any(asker.is_alive() for asker in askers):
            before = time.perf_counter()
            client.get("api/health")
            latencies.append(time.perf_counter() - before)
            time.sleep(0.2)
        burst_seconds = time.perf_counter() - started
    explorer.close()
    print(f"bounded queue: {f'yes, at most {explorer.max_pending} pending turns' if bounded else 'no'}")
    print(f"burst: {args.burst} requests in {burst_seconds:.1f} s, statuses {dict(sorted(statuses.items()))}")
    print(
        f"/api/health during the burst: median {statistics.median(latencies):.3f} s, "
        f"largest {max(latencies):.3f} s ({len(latencies)} requests)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
