"""First-stage retrieval with Lucene (through :mod:`cast.infra.jvm`): Dirichlet query likelihood or BM25."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from cast.core.records import Passage, ScoredPassage
from cast.core.resources import Resources
from cast.core.settings import Range, Runtime
from cast.core.stages import FirstStage
from cast.errors import CastError, EmptyUtteranceError
from cast.infra.jvm import corrupt_index


def passage_from_raw(docid: str, raw: str | None) -> Passage:
    """A passage from the raw JSON Lucene stored (``contents`` and optional ``title``)."""
    if not raw:
        return Passage(id=docid, text="")
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError:
        return Passage(id=docid, text=raw)
    return Passage(id=docid, text=fields.get("contents", ""), title=fields.get("title") or None)


class LuceneFirstStage(FirstStage):
    """Searches the configured index; subclasses choose the scoring function.

    Args:
        k: passages retrieved per query (the run file's depth).
        threads: threads for batch search (Lucene's own thread pool; no multiprocessing around the JVM).
    """

    def __init__(
        self,
        resources: Resources,
        k: Annotated[int, Range(1)] = 1000,
        threads: Annotated[int, Range(1), Runtime()] = 2,
    ):
        self.resources = resources
        self.k = k
        self.threads = threads
        self._searcher: Any = None

    @property
    def searcher(self) -> Any:
        if self._searcher is None:
            self._searcher = self.resources.searcher()
            self.configure(self._searcher)
        return self._searcher

    def configure(self, searcher: Any) -> None:
        raise NotImplementedError

    def search(self, query: str, k: int | None = None) -> list[ScoredPassage]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int | None = None) -> list[list[ScoredPassage]]:
        for query in queries:
            if not query.strip():
                raise EmptyUtteranceError("cannot search with an empty query")
        k = k or self.k
        qids = [str(i) for i in range(len(queries))]
        try:
            if len(queries) == 1:
                hits_by_qid = {"0": self.searcher.search(queries[0], k=k)}
            else:
                hits_by_qid = self.searcher.batch_search(list(queries), qids, k=k, threads=self.threads)
            return [self._scored(hits_by_qid[qid]) for qid in qids]
        except CastError:
            raise
        except Exception as e:  # a JavaException from a file Lucene opens only when searching (.pos, .doc...)
            raise corrupt_index(self.resources.index_dir, e) from e

    @staticmethod
    def _scored(hits: Sequence[Any]) -> list[ScoredPassage]:
        return [
            ScoredPassage(
                passage=passage_from_raw(h.docid, h.lucene_document.get("raw")),
                score=float(h.score),
                first_stage_score=float(h.score),
                first_stage_rank=rank,
            )
            for rank, h in enumerate(hits, start=1)
        ]


class LMDFirstStage(LuceneFirstStage):
    """Query likelihood with Dirichlet smoothing (Pyserini's ``set_qld``); scores are log-likelihoods.

    Args:
        mu: the Dirichlet prior.
    """

    name = "lmd"

    def __init__(
        self, resources: Resources, mu: Annotated[float, Range(0, open_low=True)] = 1000.0, **settings: Any
    ):
        super().__init__(resources, **settings)
        self.mu = mu

    def configure(self, searcher: Any) -> None:
        searcher.set_qld(float(self.mu))


class BM25FirstStage(LuceneFirstStage):
    """BM25 (Pyserini's ``set_bm25``).

    Args:
        k1: term-frequency saturation.
        b: length normalisation.
    """

    name = "bm25"

    def __init__(
        self,
        resources: Resources,
        k1: Annotated[float, Range(0)] = 0.9,
        b: Annotated[float, Range(0, 1)] = 0.4,
        **settings: Any,
    ):
        super().__init__(resources, **settings)
        self.k1, self.b = k1, b

    def configure(self, searcher: Any) -> None:
        searcher.set_bm25(float(self.k1), float(self.b))
