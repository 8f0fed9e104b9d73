"""Entity relatedness: Milne-Witten over in-link sets from a pluggable knowledge base.

Three knowledge bases give the in-link sets:

* :class:`CollectionKnowledgeBase` (offline): the passages of the indexed collection that mention an entity play
  its in-links; built with the entity dictionary (``cast entity dictionary``), see :mod:`cast.entity.link.dictionary`.
* :class:`LinkGraphKnowledgeBase`: a local link graph (TSV ``source<TAB>target``, e.g. a DBpedia page-links
  extract), held as sorted integer arrays.
* :class:`SparqlKnowledgeBase`: DBpedia's SPARQL endpoint (``dbo:wikiPageWikiLink``), answers cached on disk.

All of them answer :meth:`~cast.core.stages.KnowledgeBase.relatedness_matrix` for a whole turn at once and memoise
pairs across turns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from cast.core.settings import Runtime
from cast.core.stages import KnowledgeBase
from cast.entity.builders.collection_entities import load_postings, resolve_entities_dir
from cast.entity.inlinks import InLinkArrays
from cast.entity.link.linkers import normalise_entity
from cast.errors import CastError, ConfigError, DataFormatError, ServiceUnavailableError
from cast.infra.http import Backoff, JsonHttpClient, Retries, Timeout
from cast.infra.resources import Resources


def milne_witten(size_a: int, size_b: int, size_ab: int, total: int) -> float:
    """Milne-Witten relatedness of two entities from their in-link sets (the paper's eq. 5).

    ``rel(a, b) = 1 - (log max(|A|,|B|) - log |A∩B|) / (log |D| - log min(|A|,|B|))``, clipped to [0, 1],
    where ``A`` and ``B`` are the sets of entities linking to ``a`` and ``b`` and ``D`` all entities.

    It is 0 when the in-link sets do not intersect. When the denominator is 0 (the smaller set is all of
    ``D``) the formula is undefined; the sets then relate fully exactly when the larger one is their
    intersection. "1 for the same entity" is the knowledge base's business (:class:`PairwiseKnowledgeBase`):
    here two entities with the same in-links still score by the formula.

    Args:
        size_a: ``|A|``.
        size_b: ``|B|``.
        size_ab: ``|A ∩ B|``.
        total: ``|D|``.

    Example:
        >>> round(milne_witten(4, 2, 1, 16), 4)  # 1 - (log 4 - log 1) / (log 16 - log 2)
        0.3333
    """
    if size_ab <= 0 or size_a <= 0 or size_b <= 0:
        return 0.0
    if size_ab > min(size_a, size_b) or max(size_a, size_b) > total:
        raise ValueError(f"inconsistent set sizes |A|={size_a} |B|={size_b} |A∩B|={size_ab} |D|={total}")
    larger, smaller = max(size_a, size_b), min(size_a, size_b)
    denominator = math.log(total) - math.log(smaller)
    if denominator <= 0:
        return 1.0 if size_ab == larger else 0.0
    value = 1.0 - (math.log(larger) - math.log(size_ab)) / denominator
    return min(1.0, max(0.0, value))


def sorted_intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """``|a ∩ b|`` for sorted arrays of unique integers (binary search of the smaller in the larger)."""
    if len(a) > len(b):
        a, b = b, a
    if not len(a):
        return 0
    positions = np.searchsorted(b, a)
    positions[positions == len(b)] = 0
    return int(np.count_nonzero(b[positions] == a))


class PairwiseKnowledgeBase(KnowledgeBase):
    """Relatedness from in-link set sizes, memoised per unordered pair; subclasses give the sizes.

    Subclasses implement :meth:`set_sizes` (``|A|`` for many entities), :meth:`intersection_sizes`
    (``|A∩B|`` for many pairs) and :attr:`total` (``|D|``).
    """

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], float] = {}

    @property
    def total(self) -> int:
        raise NotImplementedError

    def set_sizes(self, entities: Sequence[str]) -> list[int]:
        raise NotImplementedError

    def intersection_sizes(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        raise NotImplementedError

    def relatedness(self, a: str, b: str) -> float:
        return self.relatedness_matrix([a], [b])[0][0]

    def relatedness_matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]:
        """Milne-Witten for every (left, right) pair; 1 on the same entity, new pairs computed in one batch."""
        wanted = {_pair(a, b) for a in left for b in right if a != b}
        missing = sorted(p for p in wanted if p not in self._memo)
        if missing:
            entities = sorted({e for pair in missing for e in pair})
            sizes = dict(zip(entities, self.set_sizes(entities), strict=True))
            candidates = [p for p in missing if sizes[p[0]] and sizes[p[1]]]
            shared = dict(zip(candidates, self.intersection_sizes(candidates), strict=True))
            total = self.total
            for pair in missing:
                a, b = pair
                self._memo[pair] = milne_witten(sizes[a], sizes[b], shared.get(pair, 0), total)
        return [[1.0 if a == b else self._memo[_pair(a, b)] for b in right] for a in left]


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class ArrayKnowledgeBase(PairwiseKnowledgeBase):
    """A knowledge base whose in-link sets are :class:`InLinkArrays` held in memory."""

    def __init__(self, arrays: InLinkArrays, total: int):
        super().__init__()
        self.arrays = arrays
        self._total = total

    @property
    def total(self) -> int:
        return self._total

    def set_sizes(self, entities: Sequence[str]) -> list[int]:
        return [self.arrays.size(e) for e in entities]

    def intersection_sizes(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        """All pairs at once: the entities' in-link sets as rows of a sparse 0/1 matrix ``M``; ``M Mᵀ`` holds
        every pairwise intersection size (ten times faster than intersecting the sets pair by pair)."""
        if len(pairs) < 8:
            return [
                sorted_intersection_size(self.arrays.inlinks(a), self.arrays.inlinks(b)) for a, b in pairs
            ]
        from scipy import sparse

        entities = sorted({e for pair in pairs for e in pair})
        row = {e: i for i, e in enumerate(entities)}
        sets = [np.asarray(self.arrays.inlinks(e)) for e in entities]
        indptr = np.zeros(len(sets) + 1, dtype=np.int64)
        np.cumsum([len(members) for members in sets], out=indptr[1:])
        columns = np.concatenate(sets)
        width = int(columns.max(initial=0)) + 1
        matrix = sparse.csr_matrix(
            (np.ones(len(columns), dtype=np.int32), columns, indptr), shape=(len(entities), width)
        )
        shared = (matrix @ matrix.T).toarray()
        return [int(shared[row[a], row[b]]) for a, b in pairs]


class CollectionKnowledgeBase(ArrayKnowledgeBase):
    """The collection as knowledge base: ``|A|`` = passages mentioning ``a``, ``|D|`` = passages.

    The postings come from the entity resources built next to the index (:func:`cast.entity.link.dictionary.
    build_entity_resources`); a passage mentions an entity when it contains one of the entity's surface forms
    (resolved to its most common sense, or to the passage's own article where that is a candidate), and every
    passage mentions its own article."""

    name = "collection"

    class Settings(ArrayKnowledgeBase.Settings):
        entities_dir: Annotated[
            str | None,
            Field(
                description="the entity resources folder; by default the one next to the configured index."
            ),
        ] = None

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        folder = resolve_entities_dir(self.setting_values.entities_dir, resources)
        arrays, passages = load_postings(folder)
        super().__init__(arrays, passages)
        self.entities_dir = folder

    def described_extras(self) -> dict[str, Any]:
        return {"entities_dir": str(self.entities_dir), "passages": self.total}


class LinkGraphKnowledgeBase(ArrayKnowledgeBase):
    """A local link graph: a TSV file of ``source<TAB>target`` lines (DBpedia ids, ``dbr:`` names or titles)."""

    name = "link_graph"

    class Settings(ArrayKnowledgeBase.Settings):
        path: Annotated[
            str,
            Field(description="the TSV file (lines starting with ``#`` and holding no TAB are comments)."),
        ]
        total: Annotated[
            int | None, Field(description="``|D|``; by default the number of distinct entities in the file.")
        ] = None

    setting_values: Settings

    def __init__(self):
        settings = self.setting_values
        graph = Path(settings.path).expanduser()
        arrays, nodes = load_link_graph(graph)
        largest = int(np.diff(arrays.offsets).max(initial=0))
        if settings.total is not None and settings.total < largest:
            raise ConfigError(
                f"knowledge_base.total={settings.total} is smaller than an in-link set of {graph} ({largest})"
            )
        super().__init__(arrays, settings.total or nodes)
        self.path = graph

    def described_extras(self) -> dict[str, Any]:
        return {"path": str(self.path), "total": self.total}


def load_link_graph(path: Path) -> tuple[InLinkArrays, int]:
    """The in-link arrays of a TSV link graph, and its number of distinct entities."""
    import csv

    import pandas as pd

    if not path.is_file():
        raise CastError(f"no link-graph file at {path}: give a TSV file of source<TAB>target lines")
    try:
        edges = pd.read_csv(
            path,
            sep="\t",
            header=None,
            names=["source", "target"],
            usecols=[0, 1],
            dtype=str,
            quoting=csv.QUOTE_NONE,
            keep_default_na=False,
            engine="c",
        )
    except (ValueError, pd.errors.ParserError) as e:
        raise DataFormatError(path, f"not a TSV file of source<TAB>target lines: {e}") from e
    # Comment lines ("# ..." without a TAB) are dropped; '#' elsewhere belongs to names ("C#").
    edges = edges[~(edges["source"].str.startswith("#") & (edges["target"] == ""))]
    if (edges["target"] == "").any():
        row = int(np.argmax((edges["target"] == "").to_numpy()))
        raise DataFormatError(path, "a line without a TAB-separated target", line=int(edges.index[row]) + 1)
    if edges.empty:
        raise DataFormatError(path, "no links in the file")
    codes, names = pd.factorize(pd.concat([edges["source"], edges["target"]], ignore_index=True))
    # Normalise the distinct names only (far fewer than the lines), then merge names that became equal.
    normal_codes, entities = pd.factorize(pd.Index([normalise_entity(n) for n in names]))
    codes = normal_codes[codes].astype(np.int32)
    sources, targets = codes[: len(edges)], codes[len(edges) :]
    return InLinkArrays.from_pairs(list(entities), targets, sources), len(entities)


SPARQL_ADVICE = (
    "point knowledge_base.endpoint at a running SPARQL endpoint, or use an offline knowledge base "
    "(knowledge_base.name: collection or link_graph)"
)


class SparqlKnowledgeBase(PairwiseKnowledgeBase):
    """DBpedia's SPARQL endpoint: in-links are ``?s dbo:wikiPageWikiLink <entity>``, counted by query.

    Set sizes and intersections of a whole turn are asked in two queries (``VALUES`` blocks); every answer is
    cached on disk per entity or pair, so a rerun asks nothing. Partial answers (Virtuoso's "anytime" results,
    cut at the endpoint's time limit) are refused with a clear error, never taken or cached."""

    name = "sparql"

    LINK = "<http://dbpedia.org/ontology/wikiPageWikiLink>"

    class Settings(PairwiseKnowledgeBase.Settings):
        endpoint: Annotated[str, Field(description="the SPARQL endpoint URL.")] = "https://dbpedia.org/sparql"
        total: Annotated[
            int | None,
            Field(
                description=(
                    "``|D|``; by default asked once from the endpoint (the number of entities with a page link), "
                    "which the public endpoint cuts short (a partial answer, refused): set it here (the paper "
                    "profile does)."
                )
            ),
        ] = None
        batch: Annotated[
            int, Field(ge=1, description="the most entities or pairs asked in one query."), Runtime()
        ] = 50
        timeout: Timeout = 30.0
        retries: Retries = 3
        backoff: Backoff = 1.0

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        super().__init__()
        self.http = JsonHttpClient(
            "DBpedia SPARQL",
            timeout=settings.timeout,
            retries=settings.retries,
            backoff=settings.backoff,
            refuse_partial=True,  # a cut-short count is wrong, and would be cached for good
            advice=SPARQL_ADVICE,
        )
        self.resources = resources
        self._total = settings.total

    @property
    def total(self) -> int:
        if self._total is None:
            query = f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ ?s {self.LINK} ?o }}"
            self._total = self._cached(
                "sparql-total", [{"endpoint": self.setting_values.endpoint}], lambda _: [self._count(query)]
            )[0]
        return self._total

    def set_sizes(self, entities: Sequence[str]) -> list[int]:
        inputs = [{"endpoint": self.setting_values.endpoint, "entity": e} for e in entities]
        return self._cached(
            "sparql-inlinks", inputs, lambda missing: self._ask_sizes([i["entity"] for i in missing])
        )

    def intersection_sizes(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        inputs = [{"endpoint": self.setting_values.endpoint, "a": a, "b": b} for a, b in pairs]
        return self._cached(
            "sparql-shared-inlinks",
            inputs,
            lambda missing: self._ask_shared([(i["a"], i["b"]) for i in missing]),
        )

    def _cached(self, namespace: str, inputs: list[dict], compute) -> list[int]:
        if self.resources is None:
            return compute(inputs)
        return self.resources.cache.get_or_compute_many(namespace, inputs, compute, _is_count)

    def _ask_sizes(self, entities: list[str]) -> list[int]:
        found: dict[str, int] = {}
        for start in range(0, len(entities), self.setting_values.batch):
            chunk = entities[start : start + self.setting_values.batch]
            values = " ".join(iri(e) for e in chunk)
            query = (
                f"SELECT ?e (COUNT(DISTINCT ?s) AS ?n) WHERE {{ VALUES ?e {{ {values} }} ?s {self.LINK} ?e }} "
                "GROUP BY ?e"
            )
            for row in self._select(query):
                found[normalise_entity(row["e"])] = int(row["n"])
        return [found.get(e, 0) for e in entities]

    def _ask_shared(self, pairs: list[tuple[str, str]]) -> list[int]:
        found: dict[tuple[str, str], int] = {}
        for start in range(0, len(pairs), self.setting_values.batch):
            chunk = pairs[start : start + self.setting_values.batch]
            values = " ".join(f"({iri(a)} {iri(b)})" for a, b in chunk)
            query = (
                f"SELECT ?a ?b (COUNT(DISTINCT ?s) AS ?n) WHERE {{ VALUES (?a ?b) {{ {values} }} "
                f"?s {self.LINK} ?a . ?s {self.LINK} ?b }} GROUP BY ?a ?b"
            )
            for row in self._select(query):
                found[(normalise_entity(row["a"]), normalise_entity(row["b"]))] = int(row["n"])
        return [found.get(pair, 0) for pair in pairs]

    def _count(self, query: str) -> int:
        rows = self._select(query)
        return int(rows[0]["n"]) if rows else 0

    def _select(self, query: str) -> list[dict[str, str]]:
        """The rows of a SELECT query's SPARQL JSON results, as ``{variable: value}``."""
        answer = self.http.request(
            "GET",
            self.setting_values.endpoint,
            params={"query": query, "format": "application/sparql-results+json"},
            headers={"Accept": "application/sparql-results+json"},
        )
        try:
            bindings = answer["results"]["bindings"]
            return [{var: cell["value"] for var, cell in row.items()} for row in bindings]
        except (KeyError, TypeError) as e:
            raise ServiceUnavailableError(
                f"{self.setting_values.endpoint} did not answer with SPARQL JSON results ({e}): {answer!r:.200}"
            ) from e


# What an IRI may not hold, and "%", "?" and "#", which DBpedia's IRIs escape (dbr:Who_Framed_Roger_Rabbit%3F):
# identifiers hold them decoded (normalise_entity), so they are encoded again here.
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\%?#]')


def iri(entity: str) -> str:
    """``<entity>`` for a SPARQL query, with the characters an IRI may not hold percent-escaped, as are ``%``,
    ``?`` and ``#`` (DBpedia's IRIs escape them; :func:`normalise_entity` decodes them back)."""
    return "<" + _NOT_IN_IRI.sub(lambda m: f"%{ord(m.group()):02X}", entity) + ">"


def _is_count(value: Any) -> bool:
    """Whether a cached value is a count (a damaged or foreign cache entry may be anything)."""
    return isinstance(value, int) and not isinstance(value, bool)
