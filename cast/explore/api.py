"""The explorer's web application: a JSON API under ``/api`` and the page at ``/`` that uses it.

Endpoints (the OpenAPI schema is at ``/openapi.json``; errors are JSON ``{"error": message, ...}``):

- ``GET /api/health``: ``{"status": "ok"}``.
- ``GET /api/options``: the stages the page can choose between, the settings each takes, the config's defaults.
- ``GET /api/conversations``; ``GET /api/conversations/{id}``: the conversations and their turns.
- ``POST /api/conversations`` ``{"title"}``: a new conversation to type; ``POST /api/conversations/{id}/turns``
  ``{"utterance", "manual_rewrite"?}`` adds a turn to it.
- ``POST /api/jobs`` ``{"conversation_id", "turn", "params"}``: answer a turn (and the turns before it) with the
  given parameters; 200 with the result when cached, else 202 with a job to poll at ``GET /api/jobs/{id}``
  (its ``stage`` says what is running; a failed job answers with the error's status).
- ``POST /api/answer``: the same, waiting for the result (for scripts).

At most ``max_pending`` turns (8) are answered or wait to be at once; a request for another uncached turn gets 503
with ``Retry-After``, so that health checks and cached turns stay fast under a burst.

A job is ``{"job_id", "status", "stage", "turn", "total_turns", "elapsed", "cached", "params", "ignored",
"result"?}``: ``params`` are the settings the turn was answered with, ``ignored`` the requested ones the chosen
stages do not take, and ``result`` the turn's view (:func:`cast.explore.views.turn_view`): ``utterance``,
``rewrite``, ``passages`` (rank, first-stage rank and score, re-ranked score, selection score, chosen position,
judged grade, entities), ``chosen``, ``selection`` (focus and top entities, EP paths), ``graph`` (``nodes`` with
rank and marks, ``edges`` kept), ``answer`` (``sentences`` with their ``passage_id``), ``verification`` (each
claim's support, where the config has a verifier; else null), ``evaluation`` and ``timings``.

Example::

    curl -s localhost:8000/api/answer -H 'Content-Type: application/json' \
        -d '{"conversation_id": "1", "turn": 2, "params": {"method": "eg", "gamma": 0.5}}'

Safety: the server binds 127.0.0.1 and accepts only local ``Host`` headers; request bodies over
``max_body_bytes`` are refused with 413 (chunked ones too), bodies not received within ``body_timeout`` seconds
with 408 (and a request head not received in time closes the connection: :mod:`cast.explore.server`), and
requests that change state from pages of another origin (scheme, host and port: ``Origin``) with 403; a client
that goes away mid-request is one line in the log; a turn is stopped after the time limit (504); the page sets
every text as text (never as HTML) and a Content-Security-Policy allows only this server's own scripts and
styles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from cast.core.records import Conversation
from cast.core.registry import STAGES, stage_class
from cast.errors import CastError, ServiceUnavailableError
from cast.explore.engine import (
    MAX_TURNS,
    STAGE_CHOICES,
    STAGE_SETTINGS,
    BusyError,
    Choice,
    Explorer,
    InvalidRequestError,
    Job,
    NotFoundError,
    TimeLimitError,
    current_params,
    stage_settings,
)

logger = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
MAX_BODY_BYTES = 64 * 1024
# Seconds a client has to send a request's body (64 KiB arrive in milliseconds on this machine): a client that
# trickles it would otherwise hold its connection, and a server thread, for ever.
BODY_TIMEOUT_S = 10.0
RETRY_AFTER_S = 2  # told to clients refused while the server is busy
LOCAL_HOSTS = ("127.0.0.1", "localhost")
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def control(kind: str, stage: str, setting: str, cap: float) -> Any:
    """A page parameter for a stage setting: its bounds and description from the stage's declaration
    (:mod:`cast.core.settings`), at most ``cap``; a setting with no lower bound starts at 0."""
    declared = stage_class(kind, stage).settings()[setting]
    low, high, _, _ = declared.bounds
    return Field(None, ge=low or 0, le=cap if high is None else min(cap, high), description=declared.doc)


class Params(BaseModel):
    """The parameters a turn is answered with; a missing one keeps the config's value."""

    model_config = ConfigDict(extra="forbid")

    method: str | None = Field(None, max_length=40, description="passage selector: o, er or eg")
    reranker: str | None = Field(None, max_length=40, description="re-ranker name, e.g. none, biencoder")
    generator: str | None = Field(None, max_length=40, description="summarizer name, e.g. entity_extractive")
    # The settings' bounds and meaning are the stages' declarations; the page caps what a stage leaves open.
    gamma: float | None = control("selector", "eg", "gamma", cap=1)
    tau: float | None = control("selector", "eg", "threshold", cap=100)
    path_bonus: float | None = control("selector", "eg", "path_bonus", cap=100)
    words: int | None = control("summarizer", "entity_extractive", "words", cap=1000)


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_id: str = Field(max_length=200)
    turn: int = Field(ge=1, le=1000, description="the turn's position in the conversation, from 1")
    params: Params = Field(default_factory=Params)


class NewConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, max_length=200)


class NewTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(min_length=1, max_length=2000)
    manual_rewrite: str | None = Field(None, max_length=2000)


def error_status(error: Exception) -> int:
    """The HTTP status for an error of a request or of a stage."""
    for kind, status in (
        (NotFoundError, 404),
        (InvalidRequestError, 400),
        (TimeLimitError, 504),
        (ServiceUnavailableError, 503),
        (BusyError, 503),
        (CastError, 422),
    ):
        if isinstance(error, kind):
            return status
    return 500


def error_message(error: Exception, stage: str | None = None) -> str:
    if isinstance(error, CastError):
        return str(error)
    where = f" in the {stage} stage" if stage else ""
    return f"internal error{where}: {type(error).__name__}: {error} (the server log has the traceback)"


def conversation_view(cid: str, conversation: Conversation, editable: bool) -> dict[str, Any]:
    return {
        "id": cid,
        "title": conversation.title or cid,
        "description": conversation.description,
        "editable": editable,
        "turns": [
            {
                "number": number,
                "qid": turn.qid,
                "utterance": turn.utterance,
                "manual_rewrite": turn.manual_rewrite,
                "response": turn.response,
            }
            for number, turn in enumerate(conversation.turns, start=1)
        ],
    }


def job_view(job: Job) -> dict[str, Any]:
    view: dict[str, Any] = {
        "job_id": job.id,
        "status": job.status,
        "stage": job.stage,
        "turn": job.turn,
        "total_turns": job.total_turns,
        "elapsed": round(job.elapsed, 3),
        "cached": job.cached,
        "params": current_params(job.sections),
        "ignored": job.ignored,
    }
    if job.answered is not None:
        view["result"] = job.answered.view
    return view


def _job_response(job: Job, grace: float) -> JSONResponse:
    if job.status == "failed":
        assert job.error is not None
        body = {
            "error": error_message(job.error, job.failed_stage),
            "stage": job.failed_stage,
            **job_view(job),
        }
        return JSONResponse(body, status_code=error_status(job.error))
    if job.status == "done":
        return JSONResponse(job_view(job))
    if job.elapsed > job.time_limit + grace:
        # A stage is still inside one long call (the job stops at its next stage boundary).
        message = (
            f"turn {job.turn} has run for {job.elapsed:.0f} s, past the time limit of {job.time_limit:g} s, in the "
            f"{job.stage} stage; it stops at the end of that stage"
        )
        return JSONResponse({"error": message, **job_view(job)}, status_code=504)
    return JSONResponse(job_view(job), status_code=202)


class BodySizeLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with 413 (declared or streamed, chunked included),
    and bodies not received within ``timeout`` seconds with 408; a client that goes away before its body is
    received is one line in the log.

    The body is read here, up to the limit, before the application sees it: an error raised while the
    application reads it would become FastAPI's 400.
    """

    def __init__(self, app: Any, max_bytes: int, timeout: float = BODY_TIMEOUT_S):
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        body, more = bytearray(), True
        try:
            async with asyncio.timeout(self.timeout):
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        client = "{}:{}".format(*scope.get("client") or ("a client", "?"))
                        logger.warning(
                            "explore: %s went away during its %s %s (after %d bytes of its body)",
                            client,
                            scope["method"],
                            scope["path"],
                            len(body),
                        )
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > self.max_bytes:
                        await self._refuse(scope, receive, send)
                        return
        except TimeoutError:
            response = JSONResponse(
                {"error": f"the request body did not arrive within {self.timeout:g} s"},
                status_code=408,
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Any, send: Any) -> None:
        response = JSONResponse(
            {"error": f"the request body is larger than the limit of {self.max_bytes} bytes"}, status_code=413
        )
        await response(scope, receive, send)


class SameOrigin:
    """ASGI middleware: refuse (403) a request that changes state (not GET, HEAD or OPTIONS) sent by a page of
    another origin, so that no other site's page can drive the explorer through the user's browser. An origin is a
    scheme, a host and a port: a page of ``http://localhost:9999`` or ``https://localhost`` is another site than
    the explorer at ``http://localhost:8000``. Requests without an ``Origin`` (curl, scripts) pass."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            headers = dict(scope.get("headers", ()))
            origin = headers.get(b"origin")
            if origin is not None and not same_origin(
                origin.decode("latin-1"), scope["scheme"], headers.get(b"host", b"").decode("latin-1")
            ):
                response = JSONResponse(
                    {
                        "error": f"requests from pages of another origin ({origin.decode('latin-1')!r}) are refused"
                    },
                    status_code=403,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: every response forbids scripts and styles from elsewhere (Content-Security-Policy),
    content sniffing and referrers. Pure ASGI, so that a request whose client went away (no response at all) is
    not an error here."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Callable[[dict], Awaitable[None]]) -> None:
        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", ()),
                    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode("latin-1")),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether a page of ``origin`` (an ``Origin`` header) is of the server that ``scheme`` and ``host`` (the
    request's ``Host`` header, which the host check has let through) name: the same scheme, host and port.

    Example:
        >>> same_origin("http://localhost:8000", "http", "localhost:8000"), same_origin("https://localhost", "http", "localhost")
        (True, False)
    """
    try:
        page, own = urlsplit(origin), urlsplit(f"{scheme}://{host}")
        default = {"http": 80, "https": 443}
        return (page.scheme, page.hostname, page.port or default.get(page.scheme)) == (
            own.scheme,
            own.hostname,
            own.port or default.get(own.scheme),
        )
    except ValueError:  # a port that is not a number
        return False


def create_app(
    explorer: Explorer,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout: float = BODY_TIMEOUT_S,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
) -> FastAPI:
    """The explorer's application over ``explorer`` (whose owner closes it)."""
    # Swagger UI and ReDoc load their scripts from a CDN: only the schema is served.
    app = FastAPI(
        title="CAsT Conversation Explorer",
        description=__doc__,
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(SameOrigin)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes, timeout=body_timeout)
    app.add_middleware(SecurityHeaders)
    _handle_errors(app)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # Async: answered on the event loop, never behind requests that wait in the thread pool.
    @app.get("/api/health", summary="Is the server up")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/options", summary="Stage choices, their settings and the config's defaults")
    def options() -> dict[str, Any]:
        return {
            "tag": explorer.config.get("tag"),
            "index": str(explorer.config.get("index")),
            "settings": settings_by_stage(),
            "defaults": current_params(explorer.default_sections()),
            "judged_turns": len(explorer.qrels),
            "time_limit": explorer.time_limit,
            "max_turns": MAX_TURNS,
        }

    _conversation_routes(app, explorer)
    _answer_routes(app, explorer, grace=max(2.0, 0.1 * explorer.time_limit))
    return app


def _handle_errors(app: FastAPI) -> None:
    """Every error as a JSON object ``{"error": one line}`` with its status."""

    @app.exception_handler(CastError)
    async def cast_error(request: Request, error: CastError) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if isinstance(error, BusyError) else None
        return JSONResponse({"error": str(error)}, status_code=error_status(error), headers=headers)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"error": error_message(error)}, status_code=500)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
            for e in error.errors()
        )
        return JSONResponse({"error": f"invalid request: {problems}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code)


def _conversation_routes(app: FastAPI, explorer: Explorer) -> None:
    """Listing, reading and typing conversations."""

    @app.get("/api/conversations", summary="The conversations to explore")
    def conversations() -> dict[str, Any]:
        items = []
        for cid in explorer.conversations.ids():
            conversation = explorer.conversations.get(cid)
            items.append(
                {
                    "id": cid,
                    "title": conversation.title or cid,
                    "turns": len(conversation.turns),
                    "editable": explorer.conversations.editable(cid),
                }
            )
        return {"conversations": items}

    @app.get("/api/conversations/{cid}", summary="One conversation with its turns")
    def conversation(cid: str) -> dict[str, Any]:
        return conversation_view(cid, explorer.conversations.get(cid), explorer.conversations.editable(cid))

    @app.post("/api/conversations", status_code=201, summary="Start a conversation to type turn by turn")
    def new_conversation(body: NewConversation) -> dict[str, Any]:
        cid = explorer.conversations.create(body.title)
        return conversation_view(cid, explorer.conversations.get(cid), True)

    @app.post("/api/conversations/{cid}/turns", status_code=201, summary="Add a typed turn to a conversation")
    def new_turn(cid: str, body: NewTurn) -> dict[str, Any]:
        updated = explorer.conversations.add_turn(cid, body.utterance, body.manual_rewrite)
        return conversation_view(cid, updated, True)


def _answer_routes(app: FastAPI, explorer: Explorer, grace: float) -> None:
    """Answering a turn: as a job to poll, or waiting for it (``grace``: seconds beyond the time limit)."""

    @app.post(
        "/api/jobs",
        summary="Answer a turn: the result at once when cached (200), else a job to poll (202)",
        responses={202: {"description": "queued or running: poll GET /api/jobs/{job_id}"}},
    )
    def submit(body: TurnRequest) -> JSONResponse:
        job = explorer.submit(body.conversation_id, body.turn, Choice(**body.params.model_dump()))
        return _job_response(job, grace)

    @app.get(
        "/api/jobs/{job_id}",
        summary="A job's progress (202), result (200) or error (4xx/5xx)",
        responses={202: {"description": "still queued or running"}},
    )
    def poll(job_id: str) -> JSONResponse:
        return _job_response(explorer.job(job_id), grace)

    @app.post(
        "/api/answer",
        summary="Answer a turn and wait for the result (up to the time limit); 503 when too many are pending",
    )
    async def answer(body: TurnRequest) -> JSONResponse:
        job = explorer.submit(body.conversation_id, body.turn, Choice(**body.params.model_dump()))
        # Waits on the event loop, not in a pool thread: many waiting requests starve no other request.
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()
        job.when_finished(lambda: loop.call_soon_threadsafe(finished.set))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished.wait(), explorer.time_limit + grace)
        return _job_response(job, grace)


@lru_cache(maxsize=1)
def settings_by_stage() -> dict[str, dict[str, list[str]]]:
    """The stages the page can choose, each with the page's settings it takes.

    Example: ``{"method": {"eg": ["gamma", "tau", "path_bonus"], ...}, "generator": {"topk_trim": ["words"]}}``.
    """
    settings: dict[str, dict[str, list[str]]] = {}
    for param, kind in STAGE_CHOICES.items():
        settings[param] = {}
        for name in sorted(STAGES[kind]):
            try:
                accepted = stage_settings(kind, name)
            except ImportError:  # a stage whose module is not written or installed here: not offered
                continue
            settings[param][name] = [p for p, (k, s) in STAGE_SETTINGS.items() if k == kind and s in accepted]
    return settings
