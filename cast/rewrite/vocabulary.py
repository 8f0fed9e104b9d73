"""What the rewriters that add words of earlier turns (HQE, term selection) know of the configured index: how it
analyses a word, and how rare the resulting term is (BM25 idf)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from cast.core.resources import Resources
from cast.errors import ModelUnavailableError
from cast.infra import jvm
from cast.infra.models import load_spacy


def bm25_idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency as Lucene computes it: ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    Args:
        df: number of passages containing the term.
        n_docs: number of passages in the index.
    """
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class IndexVocabulary:
    """The configured index's analyzer and document frequencies.

    The index is opened at construction, so that a missing index stops a run before its first turn.
    """

    def __init__(self, resources: Resources):

        self._reader = resources.index_reader()
        self._analyzer = jvm.analyzer(resources.stemmer)
        self.n_docs = int(self._reader.stats()["documents"])
        self.term_of = lru_cache(maxsize=65536)(self._term_of)

    def analyzed_terms(self, text: str) -> list[str]:
        """``text`` analysed as the index analyses it."""
        return list(self._reader.analyze(text, analyzer=self._analyzer))

    def _term_of(self, word: str) -> tuple[str, float] | None:
        """A word's index term and its importance (BM25 idf), or ``None`` for a stop word, a word the analyzer
        splits, or a term no passage holds."""
        terms = self.analyzed_terms(word)
        if len(terms) != 1:
            return None
        df, _ = self._reader.get_term_counts(terms[0], analyzer=None)
        return (terms[0], bm25_idf(df, self.n_docs)) if df > 0 else None


def load_tagger(model: str, setting: str) -> Any:
    """A spaCy part-of-speech tagger (no parser, entities or lemmas); ``setting`` names the config key that chose
    the model, for the error when it is not installed."""
    try:
        return load_spacy(model, disable=("parser", "ner", "lemmatizer"))
    except ModelUnavailableError as e:  # name the setting that chose it (the registry would say .model)
        raise ModelUnavailableError(e.model, e.reason, setting=setting, downloads_off=e.downloads_off) from e
