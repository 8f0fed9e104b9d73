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
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple
from urllib.parse import unquote

from cast.errors import CastError, ConfigError, ServiceUnavailableError
from cast.records import EntityMention
from cast.settings import Runtime
from cast.stages import EntityLinker

if TYPE_CHECKING:
    from cast.resources import Resources
    from entity.helpers import HelperProcesses

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


def is_spans(value: Any) -> bool:
    """Whether a cached value is a list of spans ``[start, end, entity, confidence]`` (a damaged or foreign
    cache entry may be anything)."""
    return isinstance(value, list) and all(
        isinstance(span, list)
        and len(span) == 4
        and isinstance(span[0], int)
        and isinstance(span[1], int)
        and isinstance(span[2], str)
        and isinstance(span[3], int | float)
        for span in value
    )


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
    # Processes that share large batches (entity.helpers), where a subclass keeps them.
    helpers: HelperProcesses | None = None

    def __init__(self, query_confidence: float, passage_confidence: float, max_chars: int):
        self.confidence = {"query": float(query_confidence), "passage": float(passage_confidence)}
        self.max_chars = max_chars
        self.texts_seen = 0
        self.unlinked_count = 0
        self.unlinked_in_last_batch: tuple[int, ...] = ()
        self.last_problem = ""

    def link_pieces(
        self, pieces: Sequence[str], kind: str, contexts: Sequence[str]
    ) -> Sequence[list[LinkedSpan] | None]:
        """The mentions in each piece (offsets relative to the piece), or None for a piece that could not be
        linked (its text then counts as unlinked). Pieces are non-empty; ``contexts`` are their texts' contexts
        ("" for none; see :meth:`EntityLinker.link_batch`)."""
        raise NotImplementedError

    def start_helpers(self) -> None:
        if self.helpers is not None:
            self.helpers.start()

    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        return self.link_batch([text], kind=kind)[0]

    def link_batch(
        self, texts: Sequence[str], *, kind: str = "passage", contexts: Sequence[str] | None = None
    ) -> list[list[EntityMention]]:
        check_kind(kind)
        if contexts is not None and len(contexts) != len(texts):
            raise ValueError(f"{len(contexts)} contexts for {len(texts)} texts")
        cleaned = [clean_html(text) for text in texts]
        pieces: list[str] = []
        piece_contexts: list[str] = []
        owners: list[tuple[int, int]] = []  # (text number, chunk start in the cleaned text)
        for number, clean in enumerate(cleaned):
            for start, end in chunk_spans(clean.text, self.max_chars):
                if clean.text[start:end].strip():
                    pieces.append(clean.text[start:end])
                    piece_contexts.append(contexts[number] if contexts is not None else "")
                    owners.append((number, start))
        found = self.link_pieces(pieces, kind, piece_contexts) if pieces else []
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
        self.unlinked_in_last_batch = tuple(sorted(unlinked))
        return mentions

    def report(self) -> str | None:
        """A line for the end of a run saying how many texts were left without entities, or None if none were."""
        if not self.unlinked_count:
            return None
        return (
            f"linker {self.name}: {self.unlinked_count} of {self.texts_seen} texts were left without entities "
            f"(last problem: {self.last_problem})"
        )


class NoLinker(EntityLinker):
    """Links nothing (for pipelines whose selector needs no entities)."""

    name = "none"

    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        return []


# --- web services -------------------------------------------------------------------------------------------

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
LINKER_ADVICE = (
    "start the service or point the config's endpoint at a running one, or set on_error: skip to continue "
    "without entities"
)


class RequestRejected(ServiceUnavailableError):
    """The service answered a request with a 4xx status (not retried: the request itself is refused).

    Attributes:
        status: the HTTP status.
        body: the start of the answer's text.
    """

    def __init__(self, message: str, status: int, body: str):
        super().__init__(message)
        self.status = status
        self.body = body


class PartialAnswer(ServiceUnavailableError):
    """The service cut its answer short (Virtuoso's "anytime" results); taking it would give wrong counts."""


class JsonHttpClient:
    """A JSON-over-HTTP client with bounded requests, bounded retries with exponential back-off, and a circuit
    breaker.

    ``timeout`` bounds each attempt as a whole (connecting, the headers and the whole body), so a server that
    trickles its answer cannot hold a request longer. Connection errors, timeouts, 429 and 5xx answers are
    retried ``retries`` times, waiting ``backoff * 2**attempt`` seconds between attempts; then a
    :class:`ServiceUnavailableError` names the service, the endpoint and ``advice``. Other 4xx answers are not
    retried (:class:`RequestRejected`: the request itself is wrong). After ``give_up_after`` requests in a row
    failed so, the service is taken as down for the rest of the run: later requests fail at once, saying so.

    Args:
        service: the service's name, for messages.
        timeout: seconds an attempt may take, from connecting to the last byte of the answer.
        retries: how many times a failed request is repeated.
        backoff: the first wait between attempts, in seconds.
        give_up_after: failed requests in a row after which no more are made (0: never give up).
        refuse_partial: treat Virtuoso's partial answers (HTTP 206, or an ``X-SQL-State`` header) as errors.
        advice: what the user can do when the service is unreachable, ending the message.
        sleep: how to wait (tests pass a recorder).
    """

    def __init__(
        self,
        service: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 1.0,
        give_up_after: int = 2,
        refuse_partial: bool = False,
        advice: str = LINKER_ADVICE,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if retries < 0 or timeout <= 0 or backoff < 0 or give_up_after < 0:
            raise ConfigError(
                f"{service}: need timeout > 0, retries >= 0, backoff >= 0 and give_up_after >= 0"
            )
        self.service = service
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.give_up_after = give_up_after
        self.refuse_partial = refuse_partial
        self.advice = advice
        self.sleep = sleep
        self.requests_made = 0
        self.failed_in_a_row = 0
        self._session: Any = None  # a requests.Session, made on first use (requests loads lazily)

    @property
    def gave_up(self) -> bool:
        """Whether the service is taken as down for the rest of the run."""
        return 0 < self.give_up_after <= self.failed_in_a_row

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        """The parsed JSON answer of ``requests.request(method, url, **kwargs)``."""
        if self.gave_up:
            raise ServiceUnavailableError(
                f"{self.service} at {url} is not asked again in this run: {self.failed_in_a_row} requests in a "
                f"row failed; {self.advice}"
            )
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests_made += 1
            outcome = self._attempt(method, url, kwargs)
            if isinstance(outcome, str):
                problem = outcome
                continue
            status, headers, body = outcome
            if status in RETRIED_STATUS:
                problem = f"HTTP {status}"
                continue
            self.failed_in_a_row = 0  # the service answers
            text = body.decode("utf-8", errors="replace")
            if status >= 400:
                raise RequestRejected(
                    f"{self.service} at {url} rejected the request with HTTP {status}: {text[:200]!r}; check the "
                    "endpoint URL and settings in the config",
                    status,
                    text[:1000],
                )
            if self.refuse_partial and (status == 206 or "X-SQL-State" in headers):
                raise PartialAnswer(
                    f"{self.service} at {url} gave a partial answer (HTTP {status}, X-SQL-State: "
                    f"{headers.get('X-SQL-State', '-')}: the endpoint stopped the query at its time limit); it is "
                    "refused rather than taken for a count: ask a less costly question (a smaller batch) or an "
                    "endpoint without that limit"
                )
            try:
                return json.loads(text)
            except ValueError:
                raise ServiceUnavailableError(
                    f"{self.service} at {url} answered with something other than JSON: {text[:200]!r}; "
                    "check that the endpoint URL points at the service's API"
                ) from None
        self.failed_in_a_row += 1
        raise ServiceUnavailableError(
            f"{self.service} at {url} is unreachable ({problem}, {self.retries + 1} attempts); {self.advice}"
        )

    def _attempt(self, method: str, url: str, kwargs: dict[str, Any]) -> tuple[int, Any, bytes] | str:
        """One attempt, given at most ``timeout`` seconds in all: ``(status, headers, body)``, or what went
        wrong. It runs in a thread of its own, so that a server trickling bytes cannot hold it past the
        deadline; an attempt given up on stops at the next bytes it receives."""
        import requests
        from urllib3 import exceptions as urllib3_exceptions  # raised unwrapped while reading a streamed body

        if self._session is None:
            self._session = requests.Session()
        session = self._session
        given_up = threading.Event()
        outcome: list[tuple[int, Any, bytes] | str] = []

        def run() -> None:
            try:
                with session.request(method, url, timeout=self.timeout, stream=True, **kwargs) as response:
                    body = bytearray()
                    # read1: whatever has arrived, so a trickled answer is checked against the deadline often
                    while not given_up.is_set() and (chunk := response.raw.read1(65536, decode_content=True)):
                        body += chunk
                    outcome.append((response.status_code, response.headers, bytes(body)))
            except (requests.Timeout, urllib3_exceptions.TimeoutError, TimeoutError):
                outcome.append(f"no complete answer within {self.timeout} s")
            except (requests.RequestException, urllib3_exceptions.HTTPError, OSError) as e:
                outcome.append(f"cannot connect ({type(e).__name__})")

        worker = threading.Thread(target=run, name=f"{self.service} request", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            given_up.set()
            return f"no complete answer within {self.timeout} s"
        return outcome[0] if outcome else "no answer (the request failed)"


class RemoteLinker(SpanLinker):
    """Base of web-service linkers: answers are cached on disk, failures follow the ``on_error`` policy.

    Subclasses give :meth:`cache_inputs` (what identifies an answer; the cache namespace is the linker's name)
    and :meth:`annotate` (one request, returning the spans of one piece of text).

    Args:
        endpoint: the service URL.
        on_error: ``fail`` stops the run when the service cannot be reached; ``skip`` leaves that text without
            entities, counts it, and :meth:`report` says how many texts were left unlinked (each turn's record
            names its own). After ``give_up_after`` failed requests in a row the service is not asked again in
            the run (one warning says so); under ``skip`` the remaining texts are left unlinked at once.
        timeout, retries, backoff, give_up_after: see :class:`JsonHttpClient`.
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
        timeout: Annotated[float, Runtime()],
        retries: Annotated[int, Runtime()],
        backoff: Annotated[float, Runtime()],
        give_up_after: Annotated[int, Runtime()],
        resources: Resources | None,
    ):
        super().__init__(query_confidence, passage_confidence, max_chars)
        self.endpoint = endpoint
        self.on_error = on_error
        self.http = JsonHttpClient(
            self.service, timeout=timeout, retries=retries, backoff=backoff, give_up_after=give_up_after
        )
        self.resources = resources
        self.unanswered_count = 0  # texts the service answered with an error meaning "nothing to link"

    def cache_inputs(self, piece: str, kind: str) -> dict[str, Any]:
        raise NotImplementedError

    def annotate(self, piece: str, kind: str) -> list[LinkedSpan]:
        raise NotImplementedError

    def link_pieces(
        self, pieces: Sequence[str], kind: str, contexts: Sequence[str]
    ) -> Sequence[list[LinkedSpan] | None]:
        cache = self.resources.cache if self.resources is not None else None
        inputs = [self.cache_inputs(piece, kind) for piece in pieces]
        answers: list[Any] = (
            cache.get_many(self.name, inputs, is_spans) if cache is not None else [None] * len(pieces)
        )
        fresh = []
        for number, piece in enumerate(pieces):
            if answers[number] is not None:
                continue
            gave_up_before = self.http.gave_up
            try:
                answers[number] = [list(span) for span in self.annotate(piece, kind)]
            except NoEntitiesAnswer as e:
                log.warning("%s: no entities for a text: %s", self.name, e)
                self.unanswered_count += 1
                answers[number] = []  # not cached: the count stays true on a rerun
                continue
            except ServiceUnavailableError as e:
                if self.on_error == "fail":
                    raise
                if not gave_up_before:
                    log.warning("%s: continuing without entities for a text: %s", self.name, e)
                    self.last_problem = str(e)
                if self.http.gave_up and not gave_up_before:
                    log.warning(
                        "%s: %s at %s is not asked again in this run after %d failed requests in a row; the "
                        "remaining texts are left without entities",
                        self.name,
                        self.service,
                        self.endpoint,
                        self.http.failed_in_a_row,
                    )
                continue
            fresh.append((inputs[number], answers[number]))
        if cache is not None and fresh:
            cache.put_many(self.name, fresh)  # failures are not cached: a rerun tries them again
        return [None if answer is None else [LinkedSpan(*span) for span in answer] for answer in answers]

    def report(self) -> str | None:
        lines = [line for line in (super().report(),) if line]
        if self.http.gave_up:
            lines.append(
                f"linker {self.name}: {self.service} at {self.endpoint} was not asked again after "
                f"{self.http.failed_in_a_row} failed requests in a row"
            )
        if self.unanswered_count:
            lines.append(
                f"linker {self.name}: {self.unanswered_count} texts were answered with an error that means no "
                "entities (linked as without entities)"
            )
        return "\n".join(lines) or None

    # How many texts went unlinked is recorded per turn (TurnResult.unlinked_texts), not in describe(): a
    # description is taken before the run.


class NoEntitiesAnswer(CastError):
    """A service's error answer that means "no entities in this text" (not a failure of the service)."""
