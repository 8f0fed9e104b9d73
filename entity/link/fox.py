"""FOX (Federated knOwledge eXtraction) through its REST API: named entities only, linked to DBpedia.

FOX answers in JSON-LD (NIF): every recognised entity is a node of ``@graph`` with its text
(``anchorOf``, or ``ann:body`` in older versions), offsets (``beginIndex``/``endIndex``) and its DBpedia
resource (``taIdentRef``, or ``means``), keys being bare or prefixed (``nif:beginIndex``, ``itsrdf:taIdentRef``).
Nodes without a resource (the context, the document) are not entities and are skipped.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from cast.entity.link.linkers import (
    LinkedSpan,
    PassageConfidence,
    QueryConfidence,
    RemoteLinker,
    locate,
    normalise_entity,
)
from cast.errors import ServiceUnavailableError
from cast.infra.http import Timeout

PUBLIC_ENDPOINT = "https://fox.demos.dice-research.org/fox"
_FIELDS = {
    "surface": ("anchorOf", "body"),
    "begin": ("beginIndex",),
    "entity": ("taIdentRef", "means"),
    "confidence": ("taConfidence", "confidence"),
}


class FoxLinker(RemoteLinker):
    """Links named entities with FOX; answers are cached by (endpoint, language, text).

    FOX gives no confidence; its mentions get confidence 1.0 unless the answer carries ``taConfidence``."""

    name = "fox"
    service = "FOX"

    class Settings(RemoteLinker.Settings):
        endpoint: Annotated[str, Field(description="FOX's API URL.")] = PUBLIC_ENDPOINT
        language: Annotated[str, Field(description="the text's language code.")] = "en"
        query_confidence: QueryConfidence = 0.0
        passage_confidence: PassageConfidence = 0.0
        timeout: Timeout = 60.0

    setting_values: Settings

    @property
    def endpoint(self) -> str:
        return self.setting_values.endpoint

    def cache_inputs(self, piece: str, kind: str) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "language": self.setting_values.language, "text": piece}

    def annotate(self, piece: str, kind: str) -> list[LinkedSpan]:
        request = {
            "input": piece,
            "type": "text",
            "task": "ner",
            "output": "JSON-LD",
            "lang": self.setting_values.language,
        }
        answer = self.http.request(
            "POST", self.setting_values.endpoint, json=request, headers={"Accept": "application/ld+json"}
        )
        return parse_fox(piece, answer, self.setting_values.endpoint)


def parse_fox(text: str, answer: Any, endpoint: str = "FOX") -> list[LinkedSpan]:
    """The linked named entities of a FOX JSON-LD answer."""
    if isinstance(answer, dict):
        nodes = answer.get("@graph", [answer])
        context = answer.get("@context")
    elif isinstance(answer, list):
        nodes, context = answer, None
    else:
        raise ServiceUnavailableError(f"{endpoint} gave an answer that is not JSON-LD: {answer!r:.200}")
    prefixes = {k: v for k, v in context.items() if isinstance(v, str)} if isinstance(context, dict) else {}
    spans = []
    for node in nodes:
        if not isinstance(node, dict):
            continue
        values = _local_values(node)
        entity = _first(values, "entity")
        surface = _first(values, "surface")
        begin = _first(values, "begin")
        if entity is None or surface is None or begin is None:
            continue
        try:
            start = locate(text, str(surface), int(begin))
            confidence = float(_first(values, "confidence") or 1.0)
        except (TypeError, ValueError) as e:
            raise ServiceUnavailableError(
                f"{endpoint} gave an entity with a bad offset: {node!r:.200} ({e})"
            ) from e
        if start is not None and surface:
            spans.append(
                LinkedSpan(start, start + len(surface), normalise_entity(str(entity), prefixes), confidence)
            )
    return spans


def _local_values(node: dict[str, Any]) -> dict[str, Any]:
    """The node's values by local name (``nif:beginIndex`` and full IRIs -> ``beginIndex``), unwrapped."""
    values = {}
    for key, value in node.items():
        local = key.rsplit("#", 1)[-1].rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, dict):
            value = value.get("@value", value.get("@id"))
        values[local] = value
    return values


def _first(values: dict[str, Any], field: str) -> Any:
    return next((values[name] for name in _FIELDS[field] if values.get(name) is not None), None)
