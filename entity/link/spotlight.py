"""DBpedia Spotlight through its REST API (``/annotate`` or ``/candidates``, JSON answers), with retries and a
persistent cache."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from cast.entity.link.linkers import (
    LinkedSpan,
    NoEntitiesAnswer,
    RemoteLinker,
    locate,
    normalise_entity,
)
from cast.errors import ServiceUnavailableError
from cast.infra.http import RequestRejected
from cast.infra.resources import Resources

PUBLIC_ENDPOINT = "https://api.dbpedia-spotlight.org/{language}/annotate"
# Spotlight's answer to some texts it found nothing in (its XML result cannot be rendered as JSON): HTTP 400.
NO_ENTITIES_ERROR = "Error converting XML to JSON"


class SpotlightLinker(RemoteLinker):
    """Links with DBpedia Spotlight; answers are cached by (endpoint, confidence, support, text).

    Example:
        >>> linker = SpotlightLinker(endpoint="http://localhost:2222/rest/annotate")
        >>> linker.link("Berlin is the capital of Germany", kind="query")  # doctest: +SKIP
        [EntityMention(surface='Berlin', start=0, end=6, entity='http://dbpedia.org/resource/Berlin', ...), ...]
    """

    name = "spotlight"
    service = "DBpedia Spotlight"
    confidence_sent_to_service: ClassVar[bool] = True

    class Settings(RemoteLinker.Settings):
        endpoint: Annotated[
            str | None,
            Field(
                description="the ``/annotate`` URL; by default the public service for ``language``. A "
                "``/candidates`` URL links each surface form to its best-scored candidate (``@finalScore``, the "
                "mention's confidence)."
            ),
        ] = None
        language: Annotated[
            str,
            Field(description="the language of the public endpoint (ignored when ``endpoint`` is given)."),
        ] = "en"
        query_confidence: Annotated[
            float, Field(description="Spotlight's disambiguation confidence for queries.")
        ] = 0.35
        passage_confidence: Annotated[
            float,
            Field(description="the same for passages (the paper advises a higher one for long passages)."),
        ] = 0.5
        support: Annotated[int, Field(description="the least number of in-links of a linked entity.")] = 0
        types: Annotated[
            str,
            Field(
                description="keep (or, under ``policy: blacklist``, drop) entities of these types, "
                "comma-separated, e.g. ``DBpedia:Person,Schema:Place``; empty: all types."
            ),
        ] = ""
        sparql: Annotated[
            str,
            Field(
                description="a SPARQL SELECT whose results are the entities kept (or dropped); empty: no such "
                "filter."
            ),
        ] = ""
        policy: Annotated[
            Literal["whitelist", "blacklist"],
            Field(
                description="``whitelist`` (keep what ``types``/``sparql`` name) or ``blacklist`` (drop it)."
            ),
        ] = "whitelist"

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        super().__init__(resources=resources)
        # Spotlight's filters, sent (and part of the cache key) only where set, so unfiltered answers keep theirs.
        self.filters = {
            key: value
            for key, value in (
                ("types", settings.types),
                ("sparql", settings.sparql),
                ("policy", settings.policy),
            )
            if value and (key != "policy" or value != "whitelist")
        }

    @property
    def endpoint(self) -> str:
        settings = self.setting_values
        return settings.endpoint or PUBLIC_ENDPOINT.format(language=settings.language)

    def cache_inputs(self, piece: str, kind: str) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "confidence": self.confidence[kind],
            "support": self.setting_values.support,
            **self.filters,
            "text": piece,
        }

    def annotate(self, piece: str, kind: str) -> list[LinkedSpan]:
        try:
            answer = self.http.request(
                "POST",
                self.endpoint,
                data={
                    "text": piece,
                    "confidence": self.confidence[kind],
                    "support": self.setting_values.support,
                    **self.filters,
                },
                headers={"Accept": "application/json"},
            )
        except RequestRejected as e:
            if e.status == 400 and NO_ENTITIES_ERROR in e.body:
                raise NoEntitiesAnswer(f"{self.endpoint} answered HTTP 400 {NO_ENTITIES_ERROR!r}") from e
            raise
        if self.endpoint.rstrip("/").endswith("/candidates"):
            return parse_candidates(piece, answer, self.endpoint)
        return parse_spotlight(piece, answer, self.endpoint)


def parse_spotlight(text: str, answer: Any, endpoint: str = "Spotlight") -> list[LinkedSpan]:
    """The spans of a Spotlight ``/annotate`` JSON answer (which has no ``Resources`` when nothing was found).

    Spotlight gives every value as a string: ``@URI``, ``@surfaceForm``, ``@offset`` (in UTF-16 units) and
    ``@similarityScore``, which becomes the mention's confidence.
    """
    if not isinstance(answer, dict):
        raise ServiceUnavailableError(
            f"{endpoint} gave an answer that is not a Spotlight JSON object: {answer!r:.200}"
        )
    return _spans(
        text,
        answer.get("Resources") or (),
        lambda r: (r["@surfaceForm"], r["@offset"], r["@URI"], r.get("@similarityScore", 0.0)),
        f"{endpoint} gave a resource without a valid @surfaceForm/@offset/@URI",
    )


def parse_candidates(text: str, answer: Any, endpoint: str = "Spotlight") -> list[LinkedSpan]:
    """The spans of a Spotlight ``/candidates`` JSON answer, each linked to its best ``@finalScore`` candidate.

    The answer is Spotlight's XML turned into JSON: ``annotation.surfaceForm`` and each form's ``resource`` are
    a list, or a single object when there is one; ``@uri`` is the resource's title.
    """
    annotation = answer.get("annotation") if isinstance(answer, dict) else None
    if not isinstance(annotation, dict):
        raise ServiceUnavailableError(
            f"{endpoint} gave an answer that is not a Spotlight candidates object: {answer!r:.200}"
        )

    def best_candidate(form: dict) -> tuple[Any, Any, Any, Any] | None:
        best = max(_as_list(form.get("resource")), key=lambda r: float(r["@finalScore"]), default=None)
        return None if best is None else (form["@name"], form["@offset"], best["@uri"], best["@finalScore"])

    return _spans(
        text,
        _as_list(annotation.get("surfaceForm")),
        best_candidate,
        f"{endpoint} gave a surface form without a valid @name/@offset/@uri/@finalScore",
    )


def _spans(text: str, items: Any, read: Any, problem: str) -> list[LinkedSpan]:
    """The spans of answer ``items``; ``read(item)`` gives its ``(surface, offset, entity, score)`` (strings, as
    Spotlight gives every value) or None for an item without an entity; ``problem`` starts the error message."""
    spans = []
    for item in items:
        try:
            fields = read(item)
            if fields is None:
                continue
            surface, offset, entity, score = str(fields[0]), int(fields[1]), str(fields[2]), float(fields[3])
            start = locate(text, surface, offset)
        except (KeyError, TypeError, ValueError) as e:
            raise ServiceUnavailableError(f"{problem}: {item!r:.200} ({e})") from e
        if start is not None and surface:
            spans.append(LinkedSpan(start, start + len(surface), normalise_entity(entity), score))
    return spans


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]
