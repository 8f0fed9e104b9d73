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

Judged pools do not say whether a collection answers a turn, and no written response of CAsT 2022 dev or iKAT 2023
says the information is not available (iKAT 2024 has three such turns, without passage texts). ``--constructed``
measures the verifier where the answer is known to be there or not by construction: each turn with a written
response and provenance passages with text (CAsT 2022 dev, iKAT 2023 train and test 9-14) is given its manual
rewrite and its written response as the answer, once with its own provenance passages (the answer is there: the
verifier should keep it) and once with the provenance passages of a turn of another topic (it is not: the verifier
should withhold the fluent answer, as it should a model's answer from its own memory).

    .venv/bin/python bench/abstention.py --constructed
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cast.benchmark.scripts import DATA, DEV_2022_QRELS, existing_path, run

# Each dataset's topics and the texts of its provenance passages (bench/pooled.py's datasets).
CONSTRUCTED = {
    "cast2022": ("cast/2022-dev/2022_evaluation_topics_flattened_duplicated_v1.0.json",
                 "cast/2022-dev/provenance_passages.jsonl"),
    "ikat2023-train": ("ikat/2023_train_topics.json", "ikat/2023_train_topics_psg_text.jsonl"),
    "ikat2023-test": ("ikat/2023_test_topics_9-14.json", "ikat/2023_test_topics_9-14_psg_text.jsonl"),
}  # fmt: skip


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


def provenance_texts(path: Path) -> dict[str, str]:
    """Passage texts by id from a CAsT 2022 (``id``, ``title``, ``contents``) or iKAT (``doc_id``, ``passage_id``,
    ``passage_text``: id ``doc_id:passage_id``) provenance file."""
    import json

    texts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if "contents" in row:
                texts[row["id"]] = f"{row.get('title', '')} {row['contents']}".strip()
            else:
                texts[f"{row['doc_id']}:{row['passage_id']}"] = row["passage_text"].strip()
    return texts


def constructed_cases(data: Path) -> list[tuple[str, str, str, list[str], bool]]:
    """``(case id, question, answer, passages, answer there)``: each turn with a written response and provenance
    texts, with its own passages and with those of the next topic's first such turn (case id ``QID~other``)."""
    from cast.formats.topics import load_topics

    turns: dict[str, tuple[str, str, list[str]]] = {}
    for topics, passages in CONSTRUCTED.values():
        texts = provenance_texts(data / passages)
        for conversation in load_topics(data / topics):
            for turn in conversation.turns:
                own = [texts[pid] for pid in turn.response_ids or () if pid in texts]
                if turn.response and own and turn.qid not in turns:
                    turns[turn.qid] = (turn.manual_rewrite or turn.utterance, turn.response, own)
    topics_in_order = sorted({qid.split("_")[0] for qid in turns})
    first_of = {}
    for qid in turns:
        first_of.setdefault(qid.split("_")[0], qid)
    cases = []
    for qid, (question, response, own) in turns.items():
        topic = qid.split("_")[0]
        other = first_of[topics_in_order[(topics_in_order.index(topic) + 1) % len(topics_in_order)]]
        cases.append((qid, question, response, own, True))
        cases.append((f"{qid}~other", question, response, turns[other][2], False))
    return cases


def constructed_records(
    cases: Sequence[tuple[str, str, str, list[str], bool]], cache_dir: str
) -> dict[str, dict]:
    """Each case as an answers record's ``verification`` (every claim's support by its best passage, the best
    passage's relevance), with the verifier's defaults."""
    from cast.core.registry import stage_class
    from cast.infra.resources import Resources
    from cast.infra.text import sentences

    verifier = stage_class("verifier", "claims").from_config(
        {}, Resources({"cache_dir": cache_dir, "device": "cpu"})
    )
    threshold = verifier.setting_values.threshold
    records = {}
    for case, question, answer, passages, _ in cases:
        claims = [{"supported": max(verifier.support(c, passages)) >= threshold} for c in sentences(answer)]
        verification = {"claims": claims, "relevance": verifier.relevance(question, passages)}
        verification["abstained"] = not any(c["supported"] for c in claims)  # min_relevance 0, the default
        records[case] = {"verification": verification}
    return records


def print_rates(
    name: str,
    records: dict[str, dict],
    relevant: dict[str, bool],
    grid: Sequence[float],
    max_false_rate: float,
) -> None:
    """The table of the module docstring for one set of turns (``relevant``: whether each has its answer)."""
    print(
        f"\n{name}: {len(relevant)} turns, {sum(not v for v in relevant.values())} without a relevant passage, "
        f"{sum(relevant.values())} with one"
    )
    print("| decision | abstains without | abstains with | precision | abstentions |\n|---|---|---|---|---|")
    recorded = {q: bool(r["verification"]["abstained"]) for q, r in records.items()}
    rows = [("as recorded", recorded)]
    rows += [(f"min_relevance {t}", decisions(records, t)) for t in (0.3, 0.4, 0.5, 0.6)]
    rows.append(
        (
            f"leave one topic out (false rate <= {max_false_rate})",
            leave_one_topic_out(records, relevant, grid, max_false_rate),
        )
    )
    for label, decided in rows:
        without, with_, precision, count = rates(decided, relevant)
        print(f"| {label} | {without:.3f} | {with_:.3f} | {precision:.3f} | {count} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", nargs="+", type=existing_path)
    parser.add_argument(
        "--constructed",
        action="store_true",
        help="turns whose answer is there or not by construction (above)",
    )
    parser.add_argument("--data", type=existing_path, default=str(DATA), help="the data folder")
    parser.add_argument(
        "--cache-dir", default="~/.cache/cast-toolkit", help="the cache (sentence embeddings)"
    )
    parser.add_argument("--qrels", type=existing_path, default=str(DEV_2022_QRELS))
    parser.add_argument("--rel", type=int, default=1, help="the lowest grade of a relevant passage")
    parser.add_argument("--max-false-rate", type=float, default=0.1, help="see the module docstring")
    args = parser.parse_args()

    from cast.errors import CastError
    from cast.formats.answers import read_answers
    from cast.formats.topics import read_qrels

    grid = [round(0.2 + 0.01 * k, 2) for k in range(61)]
    if args.constructed:
        cases = constructed_cases(args.data)
        records = constructed_records(cases, args.cache_dir)
        there = {case: answer_there for case, *_, answer_there in cases}
        print_rates("constructed", records, there, grid, args.max_false_rate)
        return 0
    if not args.answers:
        parser.error("give --answers FILE... or --constructed")
    qrels = read_qrels(args.qrels)
    relevant = {qid: any(g >= args.rel for g in grades.values()) for qid, grades in qrels.items()}
    for path in args.answers:
        records = {q: r for q, r in read_answers(path).records.items() if q in relevant}
        if not records or any("verification" not in r for r in records.values()):
            raise CastError(
                f"{path}: its judged turns need verification records (run with verifier.name=claims)"
            )
        judged = {q: relevant[q] for q in records}
        print_rates(f"{path.name} (grade >= {args.rel})", records, judged, grid, args.max_false_rate)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
