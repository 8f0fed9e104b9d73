"""What every entity linker shares, and the ``none`` linker.

* :func:`entity_uri` / :func:`normalise_entity` give the one identifier form used everywhere:
  ``http://dbpedia.org/resource/Title_With_Underscores`` (an IRI: non-ASCII characters stay unescaped).
* :class:`SpanLinker` is the base of the real linkers: it strips HTML remnants and cuts long texts into chunks,
  lets the subclass link each chunk, and maps every span back onto the original text, so that
  ``text[m.start:m.end] == m.surface`` holds for every mention whatever the input looked like.
* :class:`RemoteLinker` adds what web-service linkers (Spotlight, FOX) share: a retrying HTTP client, the
  persistent cache of answers, and the ``on_error: skip`` policy with its count of texts left unlinked.
"""

from __future__ import annotations

import html
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple
from urllib.parse import unquote

from cast.errors import CastError, ConfigError, ServiceUnavailableError
from cast.records import EntityMention
from cast.stages import EntityLinker

if TYPE_CHECKING:
    from cast.resources import Resources

log = logging.getLogger(__name__)

DBPEDIA_RESOURCE = "http://dbpedia.org/resource/"
KINDS = ("query", "passage")
ON_ERROR = ("fail", "skip")


def entity_uri(title: str) -> str:
    """The DBpedia identifier of a Wikipedia article title (``"Mercury (planet)"`` -> ``.../Mercury_(planet)``)."""
    name = "_".join(title.split())
    return DBPEDIA_RESOURCE + name[:1].upper() + name[1:]


def normalise_entity(identifier: str, prefixes: dict[str, str] | None = None) -> str:
    """One form for identifiers from any source: full IRIs, ``dbr:`` CURIEs, percent-escapes, or bare titles."""
    identifier = identifier.strip()
    prefix, sep, local = identifier.partition(":")
    if sep and not local.startswith("//"):
        expansions = {"dbr": DBPEDIA_RESOURCE, "dbpedia": DBPEDIA_RESOURCE, **(prefixes or {})}
        if prefix in expansions:
            identifier = expansions[prefix] + local
    if "://" not in identifier:
        return entity_uri(unquote(identifier))
    return unquote(identifier)


def entity_title(identifier: str) -> str:
    """The article title of a DBpedia identifier (``.../Mercury_(planet)`` -> ``"Mercury (planet)"``)."""
    return identifier.rsplit("/", 1)[-1].replace("_", " ")


# --- text preparation: HTML remnants and long texts -------------------------------------------------------

_HTML_REMNANT = re.compile(r"<[^<>]{0,200}>|&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


@dataclass(frozen=True)
class CleanText:
    """A text with HTML tags blanked and character references decoded, and the way back to the original.

    Attributes:
        text: the cleaned text that linkers read.
        origin: ``origin[i]`` is the offset in the original text of ``text[i]``; one extra entry maps the end.
    """

    text: str
    origin: tuple[int, ...] | None  # None when nothing was changed (offsets are the same)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original-text span of the cleaned span ``[start, end)`` (``end > start``)."""
        if self.origin is None:
            return start, end
        return self.origin[start], self.origin[end - 1] + 1


def clean_html(text: str) -> CleanText:
    """Blank HTML tags (one space each) and decode character references such as ``&amp;``, keeping offsets."""
    if "<" not in text and "&" not in text:
        return CleanText(text, None)
    pieces: list[str] = []
    origin: list[int] = []
    position = 0
    for match in _HTML_REMNANT.finditer(text):
        pieces.append(text[position : match.start()])
        origin.extend(range(position, match.start()))
        remnant = match.group()
        replacement = " " if remnant.startswith("<") else html.unescape(remnant)
        pieces.append(replacement)
        origin.extend([match.start()] * len(replacement))
        position = match.end()
    pieces.append(text[position:])
    origin.extend(range(position, len(text) + 1))
    return CleanText("".join(pieces), tuple(origin))


_BREAKS = (re.compile(r"[.!?][\"')\]]*\s+"), re.compile(r"[;,:]\s+"), re.compile(r"\s+"))


def chunk_spans(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Cut ``text`` into consecutive spans of at most ``max_chars``, preferably after a sentence end.

    Every character belongs to exactly one span, so offsets within a chunk plus its start are offsets in
    ``text``. A span is cut inside a word only when its window has no whitespace at all.
    """
    if max_chars <= 0:
        raise ConfigError(f"max_chars must be positive, got {max_chars}")
    spans: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > max_chars:
        window = text[start : start + max_chars]
        cut = max_chars
        for pattern in _BREAKS:
            ends = [m.end() for m in pattern.finditer(window) if m.end() > max_chars // 2]
            if ends:
                cut = ends[-1]
                break
        spans.append((start, start + cut))
        start += cut
    spans.append((start, len(text)))
    return spans


def locate(text: str, surface: str, offset: int) -> int | None:
    """Where ``surface`` starts in ``text``, given a service's offset that may count UTF-16 code units.

    Java services (Spotlight, FOX) count UTF-16 units, which differ from Python's code points after any
    character outside the Basic Multilingual Plane (emoji, some CJK). Falls back to the nearest occurrence.
    """
    if text.startswith(surface, offset):
        return offset
    converted = _python_index(text, offset)
    if converted is not None and text.startswith(surface, converted):
        return converted
    occurrences = [m.start() for m in re.finditer(re.escape(surface), text)] if surface else []
    return min(occurrences, key=lambda i: abs(i - offset), default=None)


def _python_index(text: str, utf16_offset: int) -> int | None:
    units = 0
    for index, char in enumerate(text):
        if units >= utf16_offset:
            return index if units == utf16_offset else None
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text) if units == utf16_offset else None


class LinkedSpan(NamedTuple):
    """A mention found by a linker in the text it was given (before mapping back to the original text)."""

    start: int
    end: int
    entity: str
    confidence: float


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise CastError(f"entity linking: kind must be one of {', '.join(KINDS)}, got {kind!r}")


class SpanLinker(EntityLinker):
    """Base of the real linkers: subclasses implement :meth:`link_pieces` over cleaned, bounded texts.

    Args:
        query_confidence: the least confidence of a mention kept in a query.
        passage_confidence: the same for passages (the paper advises a higher one for long passages).
        max_chars: longest text handed to :meth:`link_pieces` at once; longer texts are chunked.
    """

    # Services that take the confidence as a request parameter filter by it themselves; their answers' scores
    # are on another scale and must not be filtered again.
    confidence_sent_to_service: ClassVar[bool] = False

    def __init__(self, query_confidence: float, passage_confidence: float, max_chars: int):
        if max_chars <= 0:
            raise ConfigError(f"linker {self.name}: max_chars must be positive, got {max_chars}")
        self.confidence = {"query": float(query_confidence), "passage": float(passage_confidence)}
        self.max_chars = max_chars
        self.texts_seen = 0
        self.unlinked_count = 0
        self.last_problem = ""

    def link_pieces(self, pieces: Sequence[str], kind: str) -> list[list[LinkedSpan] | None]:
        """The mentions in each piece (offsets relative to the piece), or None for a piece that could not be
        linked (its text then counts as unlinked). Pieces are non-empty."""
        raise NotImplementedError

    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        return self.link_batch([text], kind=kind)[0]

    def link_batch(self, texts: Sequence[str], *, kind: str = "passage") -> list[list[EntityMention]]:
        check_kind(kind)
        cleaned = [clean_html(text) for text in texts]
        pieces: list[str] = []
        owners: list[tuple[int, int]] = []  # (text number, chunk start in the cleaned text)
        for number, clean in enumerate(cleaned):
            for start, end in chunk_spans(clean.text, self.max_chars):
                if clean.text[start:end].strip():
                    pieces.append(clean.text[start:end])
                    owners.append((number, start))
        found = self.link_pieces(pieces, kind) if pieces else []
        mentions: list[list[EntityMention]] = [[] for _ in texts]
        unlinked: set[int] = set()
        threshold = 0.0 if self.confidence_sent_to_service else self.confidence[kind]
        for (number, offset), spans in zip(owners, found, strict=True):
            if spans is None:
                unlinked.add(number)
                continue
            text = texts[number]
            for span in spans:
                if span.confidence < threshold:
                    continue
                start, end = cleaned[number].original_span(offset + span.start, offset + span.end)
                mentions[number].append(
                    EntityMention(text[start:end], start, end, span.entity, span.confidence, self.name)
                )
        for found_in_text in mentions:
            found_in_text.sort(key=lambda m: (m.start, m.end))
        self.texts_seen += len(texts)
        self.unlinked_count += len(unlinked)
        return mentions

    def report(self) -> str | None:
        """A line for the end of a run saying how many texts were left without entities, or None if none were."""
        if not self.unlinked_count:
            return None
        return (
            f"linker {self.name}: {self.unlinked_count} of {self.texts_seen} texts were left without entities "
            f"(last problem: {self.last_problem})"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "query_confidence": self.confidence["query"],
            "passage_confidence": self.confidence["passage"],
        }


class NoLinker(EntityLinker):
    """Links nothing (for pipelines whose selector needs no entities)."""

    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        return []


# --- web services -------------------------------------------------------------------------------------------

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class JsonHttpClient:
    """A JSON-over-HTTP client with timeouts and bounded retries with exponential back-off.

    Connection errors, timeouts, 429 and 5xx answers are retried ``retries`` times, waiting
    ``backoff * 2**attempt`` seconds between attempts; then a :class:`ServiceUnavailableError` names the service
    and the endpoint. Other 4xx answers are not retried (the request itself is wrong).

    Args:
        service: the service's name, for messages.
        timeout: seconds to wait for each answer.
        retries: how many times a failed request is repeated.
        backoff: the first wait between attempts, in seconds.
        sleep: how to wait (tests pass a recorder).
    """

    def __init__(
        self,
        service: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if retries < 0 or timeout <= 0 or backoff < 0:
            raise ConfigError(f"{service}: need timeout > 0, retries >= 0 and backoff >= 0")
        self.service = service
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self.requests_made = 0
        self._session = None

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        """The parsed JSON answer of ``requests.request(method, url, **kwargs)``."""
        import requests

        if self._session is None:
            self._session = requests.Session()
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests_made += 1
            try:
                response = self._session.request(method, url, timeout=self.timeout, **kwargs)
            except requests.Timeout:
                problem = f"no answer within {self.timeout} s"
                continue
            except requests.RequestException as e:
                problem = f"cannot connect ({type(e).__name__})"
                continue
            if response.status_code in RETRIED_STATUS:
                problem = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise ServiceUnavailableError(
                    f"{self.service} at {url} rejected the request with HTTP {response.status_code}: "
                    f"{response.text[:200]!r}; check the endpoint URL and settings in the config"
                )
            try:
                return response.json()
            except ValueError:
                raise ServiceUnavailableError(
                    f"{self.service} at {url} answered with something other than JSON: {response.text[:200]!r}; "
                    "check that the endpoint URL points at the service's API"
                ) from None
        raise ServiceUnavailableError(
            f"{self.service} at {url} is unreachable ({problem}, {self.retries + 1} attempts); start the service "
            "or point the config's endpoint at a running one, or set on_error: skip to continue without entities"
        )


class RemoteLinker(SpanLinker):
    """Base of web-service linkers: answers are cached on disk, failures follow the ``on_error`` policy.

    Subclasses give :meth:`cache_inputs` (what identifies an answer; the cache namespace is the linker's name)
    and :meth:`annotate` (one request, returning the spans of one piece of text).

    Args:
        endpoint: the service URL.
        on_error: ``fail`` stops the run when the service cannot be reached; ``skip`` leaves that text without
            entities, counts it, and :meth:`report` says how many texts were left unlinked.
        timeout, retries, backoff: see :class:`JsonHttpClient`.
    """

    service = "entity linker"

    def __init__(
        self,
        *,
        endpoint: str,
        query_confidence: float,
        passage_confidence: float,
        max_chars: int,
        on_error: str,
        timeout: float,
        retries: int,
        backoff: float,
        resources: Resources | None,
    ):
        super().__init__(query_confidence, passage_confidence, max_chars)
        if on_error not in ON_ERROR:
            raise ConfigError(
                f"linker {self.name}: on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}"
            )
        self.endpoint = endpoint
        self.on_error = on_error
        self.http = JsonHttpClient(self.service, timeout=timeout, retries=retries, backoff=backoff)
        self.resources = resources

    def cache_inputs(self, piece: str, kind: str) -> dict[str, Any]:
        raise NotImplementedError

    def annotate(self, piece: str, kind: str) -> list[LinkedSpan]:
        raise NotImplementedError

    def link_pieces(self, pieces: Sequence[str], kind: str) -> list[list[LinkedSpan] | None]:
        cache = self.resources.cache if self.resources is not None else None
        inputs = [self.cache_inputs(piece, kind) for piece in pieces]
        answers = cache.get_many(self.name, inputs) if cache is not None else [None] * len(pieces)
        fresh = []
        for number, piece in enumerate(pieces):
            if answers[number] is not None:
                continue
            try:
                answers[number] = [list(span) for span in self.annotate(piece, kind)]
            except ServiceUnavailableError as e:
                if self.on_error == "fail":
                    raise
                log.warning("%s: continuing without entities for a text: %s", self.name, e)
                self.last_problem = str(e)
                continue
            fresh.append((inputs[number], answers[number]))
        if cache is not None and fresh:
            cache.put_many(self.name, fresh)  # failures are not cached: a rerun tries them again
        return [None if answer is None else [LinkedSpan(*span) for span in answer] for answer in answers]

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "endpoint": self.endpoint,
            "on_error": self.on_error,
            "unlinked_texts": self.unlinked_count,
        }
