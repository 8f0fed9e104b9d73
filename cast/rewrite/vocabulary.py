"""What the rewriters that add words of earlier turns (HQE, term selection) know of the configured index: how it
analyses a word, and how rare the resulting term is (its importance: BM25 idf).

Both read importance on the scale of a large Wikipedia collection: HQE's thresholds were chosen, and the term
selector was trained, with idf from indexes of some 800k passages. A small collection's own document frequencies
tell what it is about more than how informative a word is (in a 4,616-passage sample around Marie Curie, "radium"
is as common as "use"), so on an index of fewer than :data:`SMALL_COLLECTION` passages a word's importance is, by
default, the idf a word of its English frequency has in a large Wikipedia index (:func:`english_idf`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from cast.errors import ModelUnavailableError
from cast.infra import jvm
from cast.infra.models import load_spacy
from cast.infra.resources import Resources

# Below this many passages, ``importance: auto`` reads English word frequencies rather than the index's own.
SMALL_COLLECTION = 100_000
# (Zipf frequency, idf) knots: the median BM25 idf, in the 820k-passage pooled development index, of the words of
# the CAsT 2019-2021 and iKAT 2023 train conversations in each half-Zipf band of their English frequency; Zipf 0 is
# a word wordfreq does not know (bench/english_idf.py; bench/results-history.md, "Term importance on small collections").
ENGLISH_IDF = (
    (0.0, 12.7), (1.0, 12.11), (1.5, 11.48), (2.0, 10.6), (2.5, 9.55), (3.0, 8.53), (3.5, 7.5), (4.0, 6.48),
    (4.5, 5.58), (5.0, 4.73), (5.5, 4.1), (6.0, 3.39), (6.5, 2.38),
)  # fmt: skip

Importance = Annotated[
    Literal["auto", "index", "english"],
    Field(
        description="how rare a word counts as (its BM25 idf): ``index`` the configured index's; ``english`` the idf "
        "a word of its English frequency has in a large Wikipedia index (wordfreq); ``auto`` the index's from "
        f"{SMALL_COLLECTION:,} passages on, else ``english`` (a small collection's frequencies say what it is about "
        "more than how informative a word is)."
    ),
]


def idf_of_zipf(zipf: float) -> float:
    """The idf :data:`ENGLISH_IDF` gives a word of Zipf frequency ``zipf``: linear between the knots, level beyond
    them."""
    knots = np.array(ENGLISH_IDF)
    return float(np.interp(zipf, knots[:, 0], knots[:, 1]))


def english_idf(word: str) -> float:
    """The BM25 idf a word of ``word``'s English frequency has in a large Wikipedia index (:data:`ENGLISH_IDF`)."""
    from wordfreq import zipf_frequency

    return idf_of_zipf(zipf_frequency(word.lower(), "en"))


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

    Args:
        importance: where a word's importance comes from (:data:`Importance`).
    """

    def __init__(self, resources: Resources, importance: str = "auto"):

        self._reader = resources.index_reader()
        self._analyzer = jvm.analyzer(resources.stemmer)
        self.n_docs = int(self._reader.stats()["documents"])
        if importance == "auto":
            importance = "index" if self.n_docs >= SMALL_COLLECTION else "english"
        self.importance = importance  # as resolved: index or english
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
        if df == 0:
            return None
        return terms[0], bm25_idf(df, self.n_docs) if self.importance == "index" else english_idf(word)


def load_tagger(model: str, setting: str) -> Any:
    """A spaCy part-of-speech tagger (no parser, entities or lemmas); ``setting`` names the config key that chose
    the model, for the error when it is not installed."""
    try:
        return load_spacy(model, disable=("parser", "ner", "lemmatizer"))
    except ModelUnavailableError as e:  # name the setting that chose it (the registry would say .model)
        raise ModelUnavailableError(e.model, e.reason, setting=setting, downloads_off=e.downloads_off) from e
