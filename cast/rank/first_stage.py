"""First-stage retrieval with Lucene (through :mod:`cast.infra.jvm`): Dirichlet query likelihood or BM25."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from cast.core.records import Passage, ScoredPassage
from cast.core.settings import Runtime
from cast.core.stages import FirstStage
from cast.errors import CastError, EmptyUtteranceError
from cast.infra.jvm import corrupt_index
from cast.infra.resources import Resources


def passage_from_raw(docid: str, raw: str | None) -> Passage:
    """A passage from the raw JSON Lucene stored (``contents`` and optional ``title``)."""
    if not raw:
        return Passage(id=docid, text="")
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError:
        return Passage(id=docid, text=raw)
    return Passage(id=docid, text=fields.get("contents", ""), title=fields.get("title") or None)


# The most hits Lucene is asked for: its searchers take the count as a Java int (and cap it at the passage count).
MAX_HITS = 2**31 - 1


class LuceneFirstStage(FirstStage):
    """Searches the configured index; subclasses choose the scoring function."""

    class Settings(FirstStage.Settings):
        k: Annotated[
            int,
            Field(ge=1, le=MAX_HITS, description="passages retrieved per query (the run file's depth)."),
        ] = 1000
        threads: Annotated[
            int,
            Field(
                ge=1,
                description="threads for batch search (Lucene's own thread pool; no multiprocessing around the JVM).",
            ),
            Runtime(),
        ] = 2

    setting_values: Settings

    def __init__(self, resources: Resources):
        self.resources = resources
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
        k = k or self.setting_values.k
        qids = [str(i) for i in range(len(queries))]
        try:
            if len(queries) == 1:
                hits_by_qid = {"0": self.searcher.search(queries[0], k=k)}
            else:
                hits_by_qid = self.searcher.batch_search(
                    list(queries), qids, k=k, threads=self.setting_values.threads
                )
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
    """Query likelihood with Dirichlet smoothing (Pyserini's ``set_qld``); scores are log-likelihoods."""

    name = "lmd"

    class Settings(LuceneFirstStage.Settings):
        mu: Annotated[float, Field(gt=0, description="the Dirichlet prior.")] = 1000.0

    setting_values: Settings

    def configure(self, searcher: Any) -> None:
        searcher.set_qld(float(self.setting_values.mu))


class BM25FirstStage(LuceneFirstStage):
    """BM25 (Pyserini's ``set_bm25``)."""

    name = "bm25"

    class Settings(LuceneFirstStage.Settings):
        k1: Annotated[float, Field(ge=0, description="term-frequency saturation.")] = 0.9
        b: Annotated[float, Field(ge=0, le=1, description="length normalisation.")] = 0.4

    setting_values: Settings

    def configure(self, searcher: Any) -> None:
        searcher.set_bm25(float(self.setting_values.k1), float(self.setting_values.b))
