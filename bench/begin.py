"""How well answer-support scorers tell attributable responses from the rest, on BEGIN (Dziri et al., "Evaluating
Attribution in Dialogue Systems: The BEGIN Benchmark", TACL 2022): responses of knowledge-grounded dialogue models
with the knowledge snippet they should rest on and a human label (``Fully attributable``, ``Not fully
attributable``, ``Generic``).

For each scorer it prints, per file and over all files, the ROC AUC of "fully attributable" against the rest and
two accuracies: at the scorer's own decision rule where it has one (the verifier: every sentence supported; our
groundedness: every sentence at unigram F1 >= 0.5), and at the threshold that maximises accuracy on the rows
scored (an optimistic figure; the AUC needs no threshold). The share of the majority class is the floor.

Scorers: the claims verifier (``summarize/verify.py``: a response's lowest sentence support by the knowledge),
the two groundedness measures of ``cast eval answers`` (``grounded``: the share of sentences at unigram F1 >= 0.5
with a knowledge sentence; ``support``: the share of response words found in the knowledge), the lowest share of a
sentence's words, and of its content words, found in the knowledge, unigram F1 of response and knowledge, and
ROUGE-L F1 (stemmed) of response and knowledge. It also prints the verifier's time per response.

With several files, the verifier's offline support is fitted anew on every two of them and tested on the third
(a logistic regression over its overlaps, each sentence labelled by its response; the weights the verifier ships
are the fit on all files, printed last), beside the simple scores on the same held-out file and the one chosen on
the other two (its best AUC there), and the verifier's threshold is chosen on two files and tested on the third.

    .venv/bin/python bench/begin.py [--tsv ../shared/data/begin/begin_dev_*.tsv] [--verifier-model NLI_FOLDER]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cast.benchmark.scripts import DATA, existing_path, run

ATTRIBUTABLE = "Fully attributable"
LABELS = (ATTRIBUTABLE, "Not fully attributable", "Generic")
DEFAULT_TSVS = sorted((DATA / "begin").glob("begin_dev_*.tsv"))
# The verifier's time per response to beat: 10x faster than the 0.24 s of its embedding-based support.
TARGET_SECONDS = 0.024


def read_begin(path: Path) -> list[dict[str, str]]:
    """The rows of a BEGIN TSV (``knowledge``, ``response``, ``begin_label``...), read as written (no quoting)."""
    from cast.errors import DataFormatError

    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    for number, row in enumerate(rows, start=2):
        if not row.get("knowledge") or row.get("response") is None or row.get("begin_label") not in LABELS:
            raise DataFormatError(path, "expected BEGIN columns knowledge, response and begin_label", number)
    return rows


def roc_auc(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """The probability that a positive scores above a negative (ties count half): the Mann-Whitney form of the
    ROC AUC."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):  # average ranks over ties
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    n_pos = sum(positives)
    n_neg = len(positives) - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    rank_sum = sum(r for r, p in zip(ranks, positives, strict=True) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def accuracy(predicted: Sequence[bool], positives: Sequence[bool]) -> float:
    return sum(p == y for p, y in zip(predicted, positives, strict=True)) / len(positives)


def best_threshold(scores: Sequence[float], positives: Sequence[bool]) -> tuple[float, float]:
    """The threshold ``t`` whose ``score >= t`` is the most accurate (the lowest among ties), and its accuracy."""
    candidates = sorted(set(scores)) + [float("inf")]
    best, negated = max((accuracy([s >= t for s in scores], positives), -t) for t in candidates)
    return -negated, best


def best_threshold_accuracy(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """The highest accuracy of ``score >= t`` over every threshold ``t``."""
    return best_threshold(scores, positives)[1]


def claim_parts(knowledge: str, response: str) -> list[tuple[float, ...]]:
    """The offline support's overlaps (words, content words, names, missing words) of each sentence of
    ``response``."""
    from cast.infra.text import sentences
    from cast.summarize.verify import PassageEvidence, lexical_parts

    evidence = PassageEvidence.of(knowledge)
    return [lexical_parts(claim, evidence) for claim in sentences(response) or [response]]


def fit_support(parts: Sequence[list[tuple[float, ...]]], labels: Sequence[bool]) -> tuple[float, ...]:
    """The offline support's weights (one per overlap, then the intercept) fitted by logistic regression on the
    sentences of responses, each labelled by its response."""
    from sklearn.linear_model import LogisticRegression

    features = [p for response in parts for p in response]
    targets = [y for response, y in zip(parts, labels, strict=True) for _ in response]
    model = LogisticRegression(max_iter=1000).fit(features, targets)
    return (*(float(w) for w in model.coef_[0]), float(model.intercept_[0]))


def lowest_support(parts: list[tuple[float, ...]], weights: Sequence[float]) -> float:
    from cast.summarize.verify import offline_support

    return min(offline_support(p, weights) for p in parts)


def scorers(verifier_model: str | None, cache_dir: str | None) -> dict[str, tuple[Callable, float | None]]:
    """Each scorer's ``score(knowledge, response)`` and its own decision threshold (``None``: it has none)."""
    from rouge_score.rouge_scorer import RougeScorer

    from cast.core.registry import stage_class
    from cast.evaluate.answers import DEFAULT_SUPPORT_THRESHOLD, groundedness, unigram_f1
    from cast.infra.resources import Resources
    from cast.infra.text import sentences, words

    resources = Resources({"cache_dir": cache_dir, "device": "cpu"})
    settings = {"model": verifier_model} if verifier_model else {}
    verifier = stage_class("verifier", "claims").from_config(settings, resources)
    rouge = RougeScorer(["rougeL"], use_stemmer=True)

    def claims(response: str) -> list[str]:
        return sentences(response) or [response]

    def verified(knowledge: str, response: str) -> float:
        return min(verifier.support(claim, [knowledge])[0] for claim in claims(response))

    name = f"verifier claims ({verifier_model or 'offline'})"
    return {
        name: (verified, verifier.setting_values.threshold),
        "groundedness: grounded": (
            lambda k, r: groundedness(claims(r), [k], DEFAULT_SUPPORT_THRESHOLD)[0],
            1.0,
        ),
        "groundedness: support": (lambda k, r: groundedness(claims(r), [k])[1], None),
        "words found (lowest sentence)": (lambda k, r: min(p[0] for p in claim_parts(k, r)), None),
        "content words found (lowest sentence)": (lambda k, r: min(p[1] for p in claim_parts(k, r)), None),
        "unigram F1": (lambda k, r: unigram_f1(words(r), words(k)), None),
        "ROUGE-L F1": (lambda k, r: rouge.score(k, r)["rougeL"].fmeasure, None),
    }


def print_cross_validation(
    files: dict[str, list[dict[str, str]]], scores: dict[str, dict[str, list[float]]]
) -> None:
    """The offline support fitted on every two files and tested on the third, beside the simple scores there and
    the simple score a user would have picked on the same two files (the best AUC there)."""
    parts = {f: [claim_parts(r["knowledge"], r["response"]) for r in rows] for f, rows in files.items()}
    labels = {f: [r["begin_label"] == ATTRIBUTABLE for r in rows] for f, rows in files.items()}
    simple = [n for n in scores if n not in (next(iter(scores)), "groundedness: grounded")]
    print("\nthe offline support fitted on the other files, AUC on the held-out file:")
    print(
        f"| held out | fitted support | simple score chosen on the other files | {' | '.join(simple)} | "
        "weights (words, content, names, missing, intercept) |"
    )
    print("|" + " --- |" * (len(simple) + 4))
    held_out: dict[str, list[float]] = {"fitted support": [], "chosen simple score": []}
    pooled: list[float] = []  # every file's held-out scores, for one AUC over all rows
    for held in files:
        others = [f for f in files if f != held]
        weights = fit_support([p for f in others for p in parts[f]], [y for f in others for y in labels[f]])
        pooled += [lowest_support(p, weights) for p in parts[held]]
        fitted = roc_auc(pooled[-len(parts[held]) :], labels[held])
        trained = [y for f in others for y in labels[f]]
        chosen = max(simple, key=lambda n: roc_auc([s for f in others for s in scores[n][f]], trained))
        held_out["fitted support"].append(fitted)
        held_out["chosen simple score"].append(roc_auc(scores[chosen][held], labels[held]))
        plain = " | ".join(f"{roc_auc(scores[n][held], labels[held]):.3f}" for n in simple)
        print(
            f"| {held} | {fitted:.3f} | {chosen}: {held_out['chosen simple score'][-1]:.3f} | {plain} | "
            f"{', '.join(f'{w:.2f}' for w in weights)} |"
        )
    means = ", ".join(f"{name} {sum(v) / len(v):.3f}" for name, v in held_out.items())
    print(f"mean over the held-out files: {means}")
    every_label = [y for f in files for y in labels[f]]
    print(f"the held-out scores of all files in one ranking: AUC {roc_auc(pooled, every_label):.3f}")
    weights = fit_support([p for f in files for p in parts[f]], [y for f in files for y in labels[f]])
    print(f"fitted on all files: {', '.join(f'{w:.2f}' for w in weights)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tsv", nargs="+", type=existing_path, default=DEFAULT_TSVS, help="BEGIN TSV files")
    parser.add_argument(
        "--verifier-model", help="a local NLI cross-encoder for the verifier (default: offline)"
    )
    parser.add_argument(
        "--cache-dir",
        default="~/.cache/cast-toolkit",
        help="the cache (sentence embeddings, encoder exports)",
    )
    args = parser.parse_args()
    if not args.tsv:
        parser.error("no BEGIN TSV found: give --tsv FILE...")
    files = {path.name: read_begin(path) for path in args.tsv}
    scoring = scorers(args.verifier_model, args.cache_dir)
    scores, seconds = {}, {}
    for name, (score, _) in scoring.items():
        start = time.process_time()
        scores[name] = {f: [score(r["knowledge"], r["response"]) for r in rows] for f, rows in files.items()}
        seconds[name] = time.process_time() - start
    responses = sum(len(rows) for rows in files.values())
    verifier = next(iter(scoring))
    print(
        f"{verifier}: {seconds[verifier] / responses * 1000:.1f} CPU ms a response ({responses} responses; "
        f"target {TARGET_SECONDS * 1000:.0f} ms)"
    )
    groups = {**{f: [f] for f in files}, **({"all": list(files)} if len(files) > 1 else {})}
    for group, members in groups.items():
        labels = [r["begin_label"] == ATTRIBUTABLE for f in members for r in files[f]]
        majority = max(sum(labels), len(labels) - sum(labels)) / len(labels)
        print(
            f"\n{group}: {len(labels)} responses, {sum(labels)} fully attributable (majority {majority:.3f})"
        )
        print("| scorer | AUC | accuracy, own rule | accuracy, best threshold |\n| --- | --- | --- | --- |")
        for name, (_, threshold) in scoring.items():
            values = [s for f in members for s in scores[name][f]]
            own = "-" if threshold is None else f"{accuracy([v >= threshold for v in values], labels):.3f}"
            print(
                f"| {name} | {roc_auc(values, labels):.3f} | {own} | "
                f"{best_threshold_accuracy(values, labels):.3f} |"
            )
    if len(files) > 1 and not args.verifier_model:
        print_cross_validation(files, scores)
    if len(files) > 1:
        name = next(iter(scoring))
        print(f"\n{name}, the threshold chosen on the other files:")
        for held in files:
            others = [f for f in files if f != held]
            labels = [r["begin_label"] == ATTRIBUTABLE for f in others for r in files[f]]
            threshold, _ = best_threshold([s for f in others for s in scores[name][f]], labels)
            held_labels = [r["begin_label"] == ATTRIBUTABLE for r in files[held]]
            held_accuracy = accuracy([v >= threshold for v in scores[name][held]], held_labels)
            print(f"  {held}: threshold {threshold:.3f}, accuracy {held_accuracy:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
