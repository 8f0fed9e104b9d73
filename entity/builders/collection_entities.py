"""The entity files beside an index: a dictionary of entity names built from the collection, and its postings.

**Entity resources.** ``cast entity dictionary --index DIR --input PATH...`` (or
:func:`build_entity_resources`) reads the collection the index was built from and writes, next to the index
(:func:`entities_dir`: ``<index>.entities/``):

* ``dictionary.json``: the entities (one per article title of the collection; lists and disambiguation pages
  excepted) and their surface forms. Each title gives the title itself, the title without a parenthetical
  qualifier (``Mercury (planet)`` -> ``Mercury``) and without a comma qualifier (``Paris, Texas`` -> ``Paris``);
  a title that looks like a name gives its last word (``Marie Curie`` -> ``Curie``) where the article itself
  uses it in at least a quarter of its passages, and seldom in lower case; and every form gives its regular plural (``black holes``)
  unless that is another title's form. Surface forms are compared as lower-cased word sequences;
  forms made only of stop words or digits are left out.
  It also holds a casing table (``casing``): how the collection's text writes the names it capitalises other
  than in sentence case (:mod:`cast.entity.builders.casing`), which the ``wikipedia`` linker uses for titles the
  collection has no article for.
* ``postings.offsets.npy`` / ``postings.passages.npy``: for every entity, the sorted numbers of the passages that
  mention it (the collection knowledge base's in-link sets, :class:`cast.entity.relatedness.CollectionKnowledgeBase`).

**Two passes over the collection**, no NLP (about the time the index build takes): the first numbers the article
titles and collects the names the text capitalises (:func:`cast.entity.builders.casing.cased_names`); the second finds the
mentions, and every occurrence of the frequent capitalised names whatever their casing, each with an Aho-Corasick
automaton (:class:`cast.entity.builders.surfaces.SurfaceMatcher`).

**Counting mentions in the collection** is exact phrase matching of the surface forms over every passage's
words, left to right, longest form first. Every passage also mentions its own article. This gives each sense of
an ambiguous form a **commonness**: how often the form occurs in that entity's own article (plus one), as a share
of all its senses' counts; a mention of an ambiguous form elsewhere counts for its most common sense, or for the
passage's own article where that is one of the senses.

**Specificity** (:func:`specificity`, the linker's ``min_specificity``): commonness cannot tell a name from a
common word, since most forms have one sense ("world" -> World, "day" -> Doris Day). Without anchor texts the
collection still shows which links are generic: the share of an entity's passages that are its own article's
passages using the form. "Nixon" -> Richard Nixon scores 115 / 924 = 0.12, "day" -> Doris Day 45 / 24,879 and
"world" -> World 30 / 46,035: entities that most passages mention carry no topic and become hubs of the
entity graph.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from cast.core.records import Passage
from cast.entity.builders import casing
from cast.entity.builders.surfaces import (
    SurfaceMatcher,
    name_alias,
    plural_form,
    surface_line,
    title_aliases,
    usable_surface,
    words,
)
from cast.entity.inlinks import InLinkArrays
from cast.entity.link.linkers import entity_uri
from cast.errors import CastError, ConfigError, DataFormatError, IndexUnavailableError
from cast.formats.textfiles import decode_text, parse_json, read_bytes
from cast.index.collections import read_passages
from cast.index.record import build_record
from cast.infra.cluster import RayOptions, map_in_order
from cast.infra.resources import Resources

FORMAT = 1


ENTITIES_SUFFIX = ".entities"  # an index's entity resources lie in INDEX.entities/
DICTIONARY_FILE = "dictionary.json"
# A whole dictionary is read at once: 10 MB for 820k passages; refused beyond this, before reading.
DICTIONARY_BYTES = 1024 * 1024 * 1024


OFFSETS_FILE = "postings.offsets.npy"


PASSAGES_FILE = "postings.passages.npy"


# Article titles that name pages about many things, not an entity.
_NOT_ENTITIES = ("List of ", "Lists of ", "Index of ", "Outline of ")


# A name-derived alias must occur in at least this share of its article's passages (and in two).
ALIAS_EVIDENCE = 0.25


log = logging.getLogger(__name__)
T = TypeVar("T")


def entities_dir(index_dir: str | Path) -> Path:
    """The folder of an index's entity resources: ``<index_dir>.entities``, beside the index."""
    index = Path(index_dir).expanduser()
    return index.with_name(index.name + ENTITIES_SUFFIX)


def dictionary_path(index_dir: str | Path) -> Path:
    """The entity dictionary of an index (``<index_dir>.entities/dictionary.json``)."""
    return entities_dir(index_dir) / DICTIONARY_FILE


def resolve_entities_dir(folder: str | Path | None, resources: Resources | None) -> Path:
    """``folder`` if given, else the entity resources beside the configured index; checked to exist."""
    index = None
    if folder is None:
        if resources is None:
            raise ConfigError(
                "the offline linker and knowledge base need an index or an entities_dir setting"
            )
        index = resources.index_dir
        folder = entities_dir(index)
        how = f"--index {index}"
    else:
        how = f"--output {folder}"
    folder = Path(folder).expanduser()
    if not (folder / DICTIONARY_FILE).is_file() or not (folder / PASSAGES_FILE).is_file():
        if index is not None and not index.is_dir():
            _no_index(index)
        raise CastError(
            f"no entity dictionary at {folder}: build it from the indexed collection with "
            f"`cast entity dictionary {how} --input COLLECTION...`"
        )
    return folder


def _no_index(index_dir: Path) -> None:
    raise IndexUnavailableError(
        f"no index at {index_dir}: build one with `cast index build --input PATH --index {index_dir}`"
    )


@dataclass
class EntityDictionary:
    """Entities and their surface forms, with each sense's commonness.

    Attributes:
        entities: entity identifiers (DBpedia-style), by number.
        senses: for each surface key, ``[(entity number, commonness), ...]``, most common first.
        version: a hash of the dictionary's file, so that cached links are tied to the dictionary they used.
        passages: the number of passages of the collection it was built from.
        article_uses: for each surface key, one plus the passages of its most common sense's own article that
            use it (the count behind that sense's commonness).
        casing: lower-cased name -> how the collection writes it, for names it writes with capitals inside
            (:mod:`cast.entity.builders.casing`; empty in resources built before it existed).
    """

    entities: list[str]
    senses: dict[str, list[tuple[int, float]]]
    version: str
    passages: int
    article_uses: dict[str, int] = field(default_factory=dict)
    casing: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keys = list(self.senses)
        self.matcher = SurfaceMatcher(self.keys)

    def best_sense(self, key: str) -> tuple[str, float]:
        entity, commonness = self.senses[key][0]
        return self.entities[entity], commonness

    @classmethod
    def load(cls, folder: Path) -> EntityDictionary:
        """The dictionary file in ``folder`` (read whole, strictly: a damaged one is one line naming the
        command that rebuilds it)."""
        path = folder / DICTIONARY_FILE
        rebuild = rebuild_advice(folder)
        raw = read_bytes(path, DICTIONARY_BYTES, "entity dictionary")
        try:
            text = decode_text(raw, path)
        except DataFormatError as e:
            raise DataFormatError(path, f"{e.problem}; {rebuild}", e.line) from None
        data = parse_json(text, path, what=f"JSON ({rebuild})")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise DataFormatError(path, f"format {found} is not {FORMAT}; {rebuild}")
        try:
            surfaces = {
                str(key): [(int(e), int(n)) for e, n in counts] for key, counts in data["surfaces"].items()
            }
            titles = [str(t) for t in data["titles"]]
            passages = int(data["passages"])
            casing = {str(k): str(v) for k, v in data.get("casing", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataFormatError(
                path, f"not an entity dictionary ({type(e).__name__}: {e}); {rebuild}"
            ) from None
        senses = {}
        for key, counts in surfaces.items():
            total = sum(count for _, count in counts)
            if not counts or total <= 0:
                raise DataFormatError(path, f"surface form {key!r} has no counts; {rebuild}")
            senses[key] = [(entity, count / total) for entity, count in counts]
        version = hashlib.sha256(raw).hexdigest()[:16]
        article_uses = {key: counts[0][1] for key, counts in surfaces.items()}
        return cls([entity_uri(t) for t in titles], senses, version, passages, article_uses, casing)


def rebuild_advice(folder: Path) -> str:
    """The command that rebuilds the entity resources in ``folder`` from the collection files its index's build
    recorded (``FILES...`` where they cannot be read), to give as advice that works when followed literally."""
    import shlex

    index = (
        folder.with_name(folder.name.removesuffix(ENTITIES_SUFFIX))
        if folder.name.endswith(ENTITIES_SUFFIX)
        else None
    )
    try:
        record = build_record(index) if index is not None else None
    except DataFormatError:
        record = None
    inputs = [shlex.quote(i) for i in record["inputs"]] if record and record["inputs"] else ["FILES..."]
    where = (
        f"--index {shlex.quote(str(index))}"
        if index is not None
        else f"--index INDEX --output {shlex.quote(str(folder))}"
    )
    return f"rebuild it with `cast entity dictionary {where} --input {' '.join(inputs)}`"


@lru_cache(maxsize=4)
def _load_dictionary(folder: str, mtime: float) -> EntityDictionary:
    return EntityDictionary.load(Path(folder))


def load_dictionary(folder: Path) -> EntityDictionary:
    """The dictionary in ``folder``, loaded once per process (again if the file changes)."""
    return _load_dictionary(str(folder), (folder / DICTIONARY_FILE).stat().st_mtime)


def load_postings(folder: Path) -> tuple[InLinkArrays, int]:
    """The passage postings of every entity (memory-mapped) and the number of passages of the collection."""

    dictionary = load_dictionary(folder)
    offsets = np.load(folder / OFFSETS_FILE, mmap_mode="r")
    passages = np.load(folder / PASSAGES_FILE, mmap_mode="r")
    if len(offsets) != len(dictionary.entities) + 1:
        raise DataFormatError(folder / OFFSETS_FILE, "does not match the dictionary's entities; rebuild both")
    return InLinkArrays(dictionary.entities, offsets, passages), dictionary.passages


def specificity(article_uses: int, entity_passages: int) -> float:
    """How specific a link is: ``article_uses / entity_passages`` (see the module docstring).

    Args:
        article_uses: one plus the passages of the entity's own article that use the surface form.
        entity_passages: the passages of the collection that mention the entity (its postings, own article
            included); at least one is assumed.

    Example:
        >>> specificity(45, 24_879) < 0.002 < specificity(115, 924)
        True
    """
    return article_uses / max(1, entity_passages)


def build_entity_resources(
    index_dir: str | Path | None,
    inputs: Sequence[str | Path],
    *,
    output: str | Path | None = None,
    fmt: str | None = None,
    progress: bool = True,
    ray: RayOptions | None = None,
    processes: int = 1,
) -> Path:
    """Build the entity dictionary and the passage postings of a collection; return their folder.

    Passage numbers follow the order of ``inputs``. The folder is replaced atomically.

    Args:
        index_dir: the index built from the collection; the resources go beside it (:func:`entities_dir`).
        inputs: the collection's JSON-lines files or folders (as given to the indexer).
        output: another folder for the resources (instead of beside ``index_dir``).
        fmt: the collection format (see :func:`cast.index.collections.read_passages`); detected by default.
        progress: show progress bars.
        ray: scan the collection's passages for mentions on Ray workers (the titles are read here); the files
            written are the same.
        processes: scan the passages in this many processes of this machine (spawned, each with the scanner;
            this one reads the collection and merges); the files written are the same.

    Raises:
        IndexUnavailableError: there is no index at ``index_dir``.
        CastError: ``output`` holds other files than entity resources; no passage of ``inputs`` has a title.
        DataFormatError: an input is missing or malformed.
    """
    folder = _resources_folder(index_dir, output)
    started = time.perf_counter()

    def passages() -> Iterator[Passage]:
        return read_passages(inputs, fmt)

    # The first pass: the titles, and the names the text capitalises.
    numbers = _ArticleNumbers()
    cased_names: Counter = Counter()
    for part in _scan(
        _chunks(passages(), numbers), CasedNames(), None, ray, processes, progress, "entity titles and names"
    ):
        cased_names.update(part)
    titles, article_of = list(numbers.numbers), np.asarray(numbers.article_of, dtype=np.int32)
    del numbers
    if not titles:
        raise CastError(
            f"none of the {len(article_of):,} passages of {', '.join(map(str, inputs))} has an article title; the "
            "entity dictionary is made of a collection's titles (JSON lines with 'title', Washington Post)"
        )
    forms, tentative = _surface_forms(titles)
    keys = list(forms)
    senses = [forms[k] for k in keys]  # per form id: the entity numbers it may name
    form_ids = {key: form for form, key in enumerate(keys)}
    lower_case_checks: dict[int, list[tuple[int, re.Pattern]]] = {}
    for key, entity in tentative:
        pattern = re.compile(rf"\b{re.escape(key)}\b")  # the name in lower case, as a common word
        lower_case_checks.setdefault(entity, []).append((form_ids[key], pattern))
    # The second pass: the mentions, and every occurrence, whatever its casing, of the names seen capitalised
    # often enough.
    frequent = Counter({name: count for name, count in cased_names.items() if count >= casing.LEAST_USES})
    del cased_names
    scanner = MentionScanner(keys, senses, lower_case_checks, frequent)
    found = MentionCounts.merge(
        _scan(
            _chunks(passages(), lambda numbers, _: article_of[numbers]),
            scanner,
            len(article_of),
            ray,
            processes,
            progress,
        )
    )
    mentions_passage, mentions_form = found.passages, found.forms
    self_counts, lower_case_uses = found.self_counts, found.lower_case_uses

    # A name-derived alias ("Curie" for "Marie Curie") is kept only where the article itself uses it often, and
    # as a name: seldom in lower case ("conference" of "Wannsee Conference" is a common word).
    article_sizes = np.bincount(article_of[article_of >= 0], minlength=len(titles))

    def evidence(form: int, entity: int) -> bool:
        uses = self_counts[(form, entity)]
        return (
            uses >= max(2, ALIAS_EVIDENCE * article_sizes[entity])
            and lower_case_uses[(form, entity)] * 10 < uses
        )

    for form, key in enumerate(keys):
        senses[form] = [e for e in senses[form] if (key, e) not in tentative or evidence(form, e)]
    kept = np.fromiter((bool(s) for s in senses), bool, len(senses))
    kept_mentions = kept[mentions_form]
    mentions_passage, mentions_form = mentions_passage[kept_mentions], mentions_form[kept_mentions]
    del kept_mentions

    surfaces, best = _commonness(keys, senses, self_counts)
    owners, owner_passages = _mention_owners(
        mentions_passage, mentions_form, senses, best, article_of, len(titles)
    )
    arrays = InLinkArrays.from_pairs(titles, owners, owner_passages)
    data = {
        "format": FORMAT,
        "passages": len(article_of),
        "inputs": [str(p) for p in inputs],
        "titles": titles,
        "surfaces": surfaces,
        "casing": casing.casing_table(frequent, found.occurrences_by_name(scanner.name_keys)),
    }
    _write_folder(folder, data, arrays)
    log.info(
        "entity resources for %d passages, %d entities, %d surface forms written to %s in %.0f s",
        len(article_of),
        len(titles),
        len(surfaces),
        folder,
        time.perf_counter() - started,
    )
    return folder


def _resources_folder(index_dir: str | Path | None, output: str | Path | None) -> Path:
    """Where the entity resources go: ``output``, unless it holds other files, else beside the index."""
    if output is None and index_dir is None:
        raise ConfigError("give the index the entity resources belong to, or an output folder")
    if output is None:
        assert index_dir is not None  # checked above
        if not Path(index_dir).expanduser().is_dir():
            _no_index(Path(index_dir).expanduser())
        return entities_dir(index_dir)
    folder = Path(output).expanduser()
    if folder.is_dir() and any(folder.iterdir()) and not (folder / DICTIONARY_FILE).is_file():
        raise CastError(
            f"{folder} holds files but no {DICTIONARY_FILE}, so it is not replaced; choose an empty or new "
            "--output folder"
        )
    return folder


def _commonness(
    keys: list[str], senses: list[list[int]], self_counts: Counter
) -> tuple[dict[str, list[tuple[int, int]]], np.ndarray]:
    """Each kept form's senses with their commonness counts, most common first (one plus the passages of the
    sense's own article that use the form), and each form's most common sense (-1: none)."""
    surfaces = {}
    best = np.full(len(keys), -1, dtype=np.int32)
    for form, key in enumerate(keys):
        if senses[form]:
            counts = sorted(
                ((e, 1 + self_counts[(form, e)]) for e in senses[form]), key=lambda c: (-c[1], c[0])
            )
            surfaces[key] = counts
            best[form] = counts[0][0]
    return surfaces, best


def _mention_owners(
    mentions_passage: np.ndarray,
    mentions_form: np.ndarray,
    senses: list[list[int]],
    best: np.ndarray,
    article_of: np.ndarray,
    entities: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The entity each mention counts for, and its passage, followed by each titled passage's own article: a
    mention counts for its form's most common sense, or for the passage's own article where that is a sense."""
    owners = best[mentions_form]
    ambiguous = np.flatnonzero(np.fromiter((len(s) > 1 for s in senses), bool, len(senses))[mentions_form])
    # (form, entity) pairs as one number each: a mention's own article is a sense of its form where its pair is one.
    sense_pairs = np.fromiter(
        (form * entities + e for form, s in enumerate(senses) if len(s) > 1 for e in s), np.int64
    )
    articles = article_of[mentions_passage[ambiguous]]
    own = (articles >= 0) & np.isin(
        mentions_form[ambiguous].astype(np.int64) * entities + articles, sense_pairs
    )
    owners[ambiguous[own]] = articles[own]
    titled = np.flatnonzero(article_of >= 0).astype(np.int32)
    return np.concatenate([owners, article_of[titled]]), np.concatenate([mentions_passage, titled])


class _ArticleNumbers:
    """Numbers the distinct article titles by first appearance as the first pass reads the passages, and records
    each passage's entity (-1: none). Called with a chunk's passages, it gives their entity numbers."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.article_of = array("i")

    def __call__(self, chunk: slice, passages: Sequence[Passage]) -> np.ndarray:
        numbers = self.numbers
        for passage in passages:
            title = passage.title
            if title is None or title.startswith(_NOT_ENTITIES) or title.endswith("(disambiguation)"):
                self.article_of.append(-1)
            else:
                self.article_of.append(numbers.setdefault(title, len(numbers)))
        return np.asarray(self.article_of[chunk], dtype=np.int32)


def _surface_forms(titles: Sequence[str]) -> tuple[dict[str, list[int]], set[tuple[str, int]]]:
    """Surface key -> the entity numbers it may name; and the (key, entity) senses that need evidence.

    Plurals come last and only where no title form has the same words ("Mars" the planet is no plural).
    """
    forms: dict[str, list[int]] = {}
    tentative: set[tuple[str, int]] = set()

    def add(key: str, number: int, needs_evidence: bool) -> None:
        if usable_surface(key):
            senses = forms.setdefault(key, [])
            if number not in senses:
                senses.append(number)
                if needs_evidence:
                    tentative.add((key, number))

    for number, title in enumerate(titles):
        for alias in title_aliases(title):
            add(" ".join(words(alias)), number, needs_evidence=False)
        surname = name_alias(title)
        if surname:
            add(" ".join(words(surname)), number, needs_evidence=True)
    singulars = list(forms.items())
    for key, numbers in singulars:
        plural = plural_form(key)
        if plural not in forms:
            for number in numbers:
                if (key, number) not in tentative:
                    add(plural, number, needs_evidence=False)
    return forms, tentative


# Passages per chunk of the mention scan: a Ray call's share, and what a progress bar step counts.
SCAN_CHUNK = 5_000


@dataclass(frozen=True)
class PassageChunk:
    """Consecutive passages of the collection, as the mention scan reads them.

    Attributes:
        first: the number of the first passage (passages are numbered in collection order).
        texts: the passages' texts.
        articles: the entity number of each passage's own article (-1: none).
    """

    first: int
    texts: tuple[str, ...]
    articles: np.ndarray


@dataclass
class MentionCounts:
    """What the mention scan found (of a chunk, or of the whole collection once merged).

    Attributes:
        passages: the passage number of each (passage, form) mention, in passage order.
        forms: the form id of each mention.
        self_counts: per (form, entity), the passages of the entity's own article that use the form.
        lower_case_uses: per (form, entity) of the lower-case checks, the passages of the article where the form
            is written in lower case (a name used as a common word).
        name_numbers: the frequent capitalised names found (numbers into :attr:`MentionScanner.name_keys`, the
            names as lower-cased word sequences), each once, ascending.
        name_occurrences: the occurrences of each of ``name_numbers`` in any casing.
    """

    passages: np.ndarray
    forms: np.ndarray
    self_counts: Counter
    lower_case_uses: Counter
    name_numbers: np.ndarray
    name_occurrences: np.ndarray

    def occurrences_by_name(self, name_keys: Sequence[str]) -> dict[str, int]:
        """:attr:`name_occurrences` by the names themselves (``name_keys``: the scanner's)."""
        names = [name_keys[number] for number in self.name_numbers.tolist()]
        return dict(zip(names, self.name_occurrences.tolist(), strict=True))

    @classmethod
    def merge(cls, parts: Iterable[MentionCounts]) -> MentionCounts:
        """The counts of consecutive chunks, given in collection order (each chunk's counters are added as it
        comes, so that the chunks' name counts are not all held at once)."""
        passages, forms = [np.zeros(0, np.int32)], [np.zeros(0, np.int32)]
        totals = np.zeros(0, np.int64)  # by name number
        merged = cls(passages[0], forms[0], Counter(), Counter(), np.zeros(0, np.int32), totals)
        for part in parts:
            passages.append(part.passages)
            forms.append(part.forms)
            merged.self_counts.update(part.self_counts)
            merged.lower_case_uses.update(part.lower_case_uses)
            if len(part.name_numbers) and part.name_numbers[-1] >= len(totals):
                totals = np.concatenate([totals, np.zeros(part.name_numbers[-1] + 1 - len(totals), np.int64)])
            totals[part.name_numbers] += part.name_occurrences
        merged.passages, merged.forms = np.concatenate(passages), np.concatenate(forms)
        merged.name_numbers = np.flatnonzero(totals).astype(np.int32)
        merged.name_occurrences = totals[merged.name_numbers]
        return merged


class MentionScanner:
    """Finds every surface form in a :class:`PassageChunk`, and counts the occurrences of the frequent capitalised
    names in any casing (one worker's share of the second pass).

    Picklable and small (its matchers are built on first use), so Ray ships it to each worker once.

    Args:
        keys: the surface keys, by form id.
        senses: per form id, the entity numbers it may name.
        lower_case_checks: per article (entity number), ``(form id, pattern)`` of its names to look for in lower
            case.
        names: the names whose occurrences to count (any casing); they are counted as lower-cased word sequences.
    """

    def __init__(
        self,
        keys: Sequence[str],
        senses: Sequence[Sequence[int]],
        lower_case_checks: dict[int, list[tuple[int, re.Pattern]]],
        names: Iterable[str],
    ):
        self.keys = list(keys)
        self.senses = [frozenset(s) for s in senses]
        self.lower_case_checks = lower_case_checks
        self.name_keys = sorted({" ".join(words(name)) for name in names})
        self._matchers: tuple[SurfaceMatcher, SurfaceMatcher] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_matchers": None}

    def __call__(self, chunk: PassageChunk) -> MentionCounts:
        if self._matchers is None:
            self._matchers = SurfaceMatcher(self.keys), SurfaceMatcher(self.name_keys)
        forms, names = self._matchers
        mention_passages = array("i")
        mention_forms = array("i")
        self_counts: Counter = Counter()
        lower_case_uses: Counter = Counter()
        occurrences = array("i")  # the name number of every occurrence
        for number, (text, article) in enumerate(zip(chunk.texts, chunk.articles.tolist(), strict=True)):
            line = surface_line(words(text))
            found = {form for _, _, form in forms.longest(line)}
            for form in found:
                mention_passages.append(chunk.first + number)
                mention_forms.append(form)
                if article >= 0 and article in self.senses[form]:
                    self_counts[(form, article)] += 1
            for form, pattern in self.lower_case_checks.get(article, ()):
                if pattern.search(text):
                    lower_case_uses[(form, article)] += 1
            occurrences.extend(names.every_match(line))
        name_numbers, name_occurrences = np.unique(
            np.frombuffer(occurrences, dtype=np.int32), return_counts=True
        )
        return MentionCounts(
            np.frombuffer(mention_passages, dtype=np.int32),
            np.frombuffer(mention_forms, dtype=np.int32),
            self_counts,
            lower_case_uses,
            name_numbers.astype(np.int32),
            name_occurrences.astype(np.int64),
        )


class CasedNames:
    """The capitalised names a :class:`PassageChunk` writes other than in sentence case, and how often
    (:func:`cast.entity.builders.casing.cased_names`; one worker's share of the first pass)."""

    def __call__(self, chunk: PassageChunk) -> Counter:
        # One update for the chunk: the names in the same order as text by text, so the same counter.
        return Counter(itertools.chain.from_iterable(map(casing.cased_names, chunk.texts)))


def _chunks(
    passages: Iterable[Passage], articles: Callable[[slice, Sequence[Passage]], np.ndarray]
) -> Iterator[PassageChunk]:
    """The collection in chunks of :data:`SCAN_CHUNK` passages; ``articles(numbers, passages)`` gives the entity
    numbers of a chunk's passages (numbers: the slice of passage numbers it covers)."""
    passage_iter = iter(passages)
    for first in itertools.count(0, SCAN_CHUNK):
        batch = list(itertools.islice(passage_iter, SCAN_CHUNK))
        if not batch:
            return
        numbers = slice(first, first + len(batch))
        yield PassageChunk(first, tuple(p.text for p in batch), articles(numbers, batch))


def _scan(
    chunks: Iterable[PassageChunk],
    scanner: Callable[[PassageChunk], T],
    total: int | None,
    ray: RayOptions | None,
    processes: int,
    progress: bool,
    description: str = "entity mentions",
) -> Iterator[T]:
    """What ``scanner`` finds in each chunk of the collection (``total`` passages, if known), in collection order
    (scanned here, in ``processes`` local processes, or on Ray workers)."""
    from tqdm import tqdm

    if ray is None and processes > 1:
        found = _in_processes(scanner, chunks, processes)
    else:
        found = map_in_order(scanner, chunks, ray)
    with tqdm(desc=description, unit=" passages", total=total, disable=not progress) as bar:
        for chunk, counts in found:
            bar.update(len(chunk.texts))
            yield counts


_worker_scanner: Callable[[PassageChunk], Any] | None = None


def _set_worker_scanner(scanner: Callable[[PassageChunk], Any]) -> None:
    global _worker_scanner
    _worker_scanner = scanner


def _scan_in_worker(chunk: PassageChunk) -> Any:
    assert _worker_scanner is not None, "a scan worker without its scanner"
    return _worker_scanner(chunk)


def _in_processes(
    scanner: Callable[[PassageChunk], T], chunks: Iterable[PassageChunk], processes: int
) -> Iterator[tuple[PassageChunk, T]]:
    """``(chunk, scanner(chunk))`` in order, scanned by ``processes`` spawned processes (never forked: the
    caller may run a JVM), each given the scanner once; a few chunks per process are in flight at a time."""
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, context, _set_worker_scanner, (scanner,)) as pool:
        pending: deque = deque()
        for chunk in chunks:
            pending.append((chunk, pool.submit(_scan_in_worker, chunk)))
            if len(pending) > 2 * processes:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def _write_folder(folder: Path, data: dict[str, Any], arrays: InLinkArrays) -> None:
    """Write the resources into a fresh folder and swap it in place of the old one."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    fresh = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    (fresh / DICTIONARY_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    np.save(fresh / OFFSETS_FILE, np.asarray(arrays.offsets, dtype=np.int64))
    np.save(fresh / PASSAGES_FILE, np.asarray(arrays.members, dtype=np.int32))
    old = folder.with_name(f"{folder.name}.old-{os.getpid()}")
    if folder.exists():
        folder.rename(old)
    fresh.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
