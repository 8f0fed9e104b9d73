"""When the verifier abstains: on the judged turns, how often it withholds the answer where the judged pool holds no
relevant passage (it should) and where it holds one (it should not), and the precision of its abstentions.

It reads answers files written with a verifier (``--set verifier.name=claims``): each turn's recorded decision,
and each turn's best-passage relevance, from which it also works out the decisions of other ``min_relevance``
values (abstain where the relevance is below it, or where no claim was supported) and, for an honest figure, the
value chosen on the other topics for each topic (leave one topic out: the highest precision, ties broken by more
abstentions, among the values that keep the abstention rate on turns with a relevant passage at most
``--max-false-rate``).

    .venv/bin/python bench/abstention.py --answers runs/abstain.answers.jsonl \\
        --qrels ../shared/data/cast/2022-dev/cast2022.provenance.qrel
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DEV_2022_QRELS, existing_path, run  # noqa: E402


def rates(abstained: dict[str, bool], relevant: dict[str, bool]) -> tuple[float, float, float, int]:
    """The abstention rate on turns without a relevant passage, on turns with one, the precision of the
    abstentions (the share without a relevant passage; nan when none) and how many abstentions."""
    without = [q for q in relevant if not relevant[q]]
    with_ = [q for q in relevant if relevant[q]]
    withheld = [q for q in relevant if abstained[q]]
    share = lambda qids: sum(abstained[q] for q in qids) / len(qids) if qids else float("nan")  # noqa: E731
    precision = sum(not relevant[q] for q in withheld) / len(withheld) if withheld else float("nan")
    return share(without), share(with_), precision, len(withheld)


def decisions(records: dict[str, dict], threshold: float) -> dict[str, bool]:
    """Each turn's abstention under ``min_relevance = threshold``."""
    decided = {}
    for qid, record in records.items():
        verification = record["verification"]
        unsupported = not any(c["supported"] for c in verification["claims"])
        relevance = verification["relevance"]
        decided[qid] = unsupported or relevance is None or relevance < threshold
    return decided


def leave_one_topic_out(
    records: dict[str, dict], relevant: dict[str, bool], grid: Sequence[float], max_false_rate: float
) -> dict[str, bool]:
    """Each turn's decision under the threshold chosen on the other topics' turns."""
    topics = sorted({qid.split("_")[0] for qid in relevant})
    chosen: dict[str, bool] = {}
    for topic in topics:
        others = {q: r for q, r in relevant.items() if q.split("_")[0] != topic}

        def quality(t: float, others: dict[str, bool] = others) -> tuple[float, int]:
            _, false_rate, precision, count = rates(decisions(records, t), others)
            ok = false_rate <= max_false_rate and precision == precision  # nan: no abstention
            return (precision if ok else -1.0, count if ok else 0)

        best = max(grid, key=quality)
        mine = decisions(records, best)
        chosen.update({q: mine[q] for q in relevant if q.split("_")[0] == topic})
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", nargs="+", type=existing_path, required=True)
    parser.add_argument("--qrels", type=existing_path, default=str(DEV_2022_QRELS))
    parser.add_argument("--rel", type=int, default=1, help="the lowest grade of a relevant passage")
    parser.add_argument("--max-false-rate", type=float, default=0.1, help="see the module docstring")
    args = parser.parse_args()

    from cast.errors import CastError
    from cast.formats.answers import read_answers
    from cast.formats.topics import read_qrels

    qrels = read_qrels(args.qrels)
    relevant = {qid: any(g >= args.rel for g in grades.values()) for qid, grades in qrels.items()}
    grid = [round(0.2 + 0.01 * k, 2) for k in range(61)]
    for path in args.answers:
        records = {q: r for q, r in read_answers(path).records.items() if q in relevant}
        if not records or any("verification" not in r for r in records.values()):
            raise CastError(
                f"{path}: its judged turns need verification records (run with verifier.name=claims)"
            )
        judged = {q: relevant[q] for q in records}
        print(
            f"\n{path.name}: {len(judged)} judged turns, {sum(not v for v in judged.values())} without a relevant "
            f"passage (grade >= {args.rel}), {sum(judged.values())} with one"
        )
        print(
            "| decision | abstains without | abstains with | precision | abstentions |\n|---|---|---|---|---|"
        )
        recorded = {q: bool(r["verification"]["abstained"]) for q, r in records.items()}
        rows = [("as recorded", recorded)]
        rows += [(f"min_relevance {t}", decisions(records, t)) for t in (0.3, 0.4, 0.5, 0.6)]
        rows.append(
            (
                f"leave one topic out (false rate <= {args.max_false_rate})",
                leave_one_topic_out(records, judged, grid, args.max_false_rate),
            )
        )
        for name, decided in rows:
            without, with_, precision, count = rates(decided, judged)
            print(f"| {name} | {without:.3f} | {with_:.3f} | {precision:.3f} | {count} |")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
