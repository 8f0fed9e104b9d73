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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, NamedTuple
from urllib.parse import unquote

from pydantic import Field

from cast.core.records import EntityMention
from cast.core.settings import Runtime
from cast.core.stages import EntityLinker
from cast.entity.link.helpers import HelperProcesses
from cast.errors import CastError, ConfigError, ServiceUnavailableError
from cast.infra.http import Backoff, GiveUpAfter, JsonHttpClient, Retries, Timeout
from cast.infra.resources import Resources

log = logging.getLogger(__name__)

DBPEDIA_RESOURCE = "http://dbpedia.org/resource/"
KINDS = ("query", "passage")
OnError = Literal["fail", "skip"]
# Settings the linkers share (each gives its own default).
MaxChars = Annotated[
    int, Field(ge=1, description="longer texts are linked in chunks of at most this many characters.")
]
BatchSize = Annotated[int, Field(ge=1, description="texts per spaCy batch."), Runtime()]
Processes = Annotated[
    int,
    Field(
        ge=1,
        description="processes sharing a batch of texts (this one and ``processes - 1`` helpers, started on the "
        "first batch of at least four texts: :mod:`cast.entity.link.helpers`); 1 links everything in this process.",
    ),
    Runtime(),
]
SpacyModel = Annotated[str, Field(description="the spaCy pipeline.")]
QueryConfidence = Annotated[float, Field(description="the least confidence of a mention kept in a query.")]
PassageConfidence = Annotated[float, Field(description="the same for passages.")]


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
    """Base of the real linkers: subclasses implement :meth:`link_pieces` over cleaned, bounded texts, and give
    the least confidence of a mention kept in a query and in a passage (the paper advises a higher one for long
    passages)."""

    # Services that take the confidence as a request parameter filter by it themselves; their answers' scores
    # are on another scale and must not be filtered again.
    confidence_sent_to_service: ClassVar[bool] = False
    # Processes that share large batches (cast.entity.link.helpers), where a subclass keeps them.
    helpers: HelperProcesses | None = None

    class Settings(EntityLinker.Settings):
        max_chars: MaxChars

    setting_values: Settings

    def __init__(self, query_confidence: float, passage_confidence: float):
        self.confidence = {"query": float(query_confidence), "passage": float(passage_confidence)}
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
            for start, end in chunk_spans(clean.text, self.setting_values.max_chars):
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

LINKER_ADVICE = (
    "start the service or point the config's endpoint at a running one, or set on_error: skip to continue "
    "without entities"
)


class LocalLinkerSettings(SpanLinker.Settings):
    """The settings every linker that runs here (not a web service) shares: its chunks, its spaCy batches and the
    processes that share them."""

    max_chars: MaxChars = 10_000
    batch_size: BatchSize = 32
    processes: Processes = 2


class RemoteLinker(SpanLinker):
    """Base of web-service linkers: answers are cached on disk, failures follow the ``on_error`` policy.

    Subclasses give :attr:`endpoint` (the service's URL), :meth:`cache_inputs` (what identifies an answer; the
    cache namespace is the linker's name) and :meth:`annotate` (one request, returning the spans of one piece of
    text)."""

    service = "entity linker"

    class Settings(SpanLinker.Settings):
        query_confidence: QueryConfidence
        passage_confidence: PassageConfidence
        max_chars: MaxChars = 4000
        on_error: Annotated[
            OnError,
            Field(
                description="``fail`` stops the run when the service cannot be reached; ``skip`` leaves that text "
                "without entities, counts it, and the end-of-run report says how many texts were left unlinked "
                "(each turn's record names its own). After ``give_up_after`` failed requests in a row the service "
                "is not asked again in the run (one warning says so); under ``skip`` the remaining texts are left "
                "unlinked at once."
            ),
        ] = "fail"
        timeout: Timeout = 20.0
        retries: Retries = 3
        backoff: Backoff = 1.0
        give_up_after: GiveUpAfter = 2

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        super().__init__(settings.query_confidence, settings.passage_confidence)
        self.http = JsonHttpClient(
            self.service,
            timeout=settings.timeout,
            retries=settings.retries,
            backoff=settings.backoff,
            give_up_after=settings.give_up_after,
            advice=LINKER_ADVICE,
        )
        self.resources = resources
        self.unanswered_count: int = 0  # texts the service answered with an error meaning "nothing to link"

    @property
    def endpoint(self) -> str:
        """The service's URL."""
        raise NotImplementedError

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
                if self.setting_values.on_error == "fail":
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
