"""JSON over HTTP for the remote services (entity linkers, SPARQL endpoints, chat-model servers): each attempt is
bounded as a whole, failures are retried with back-off, and a service that keeps failing is not asked again."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from cast.core.settings import Runtime
from cast.errors import ConfigError, ServiceUnavailableError

# The client's settings, as the stages that ask a service declare them (each with its own default).
Timeout = Annotated[
    float,
    Field(
        gt=0,
        description="seconds an attempt may take in all, from connecting to the last byte of the answer.",
    ),
    Runtime(),
]
Retries = Annotated[
    int,
    Field(description="how many times a failed request (no connection, time-out, 429, 5xx) is repeated."),
    Runtime(),
]
Backoff = Annotated[
    float, Field(description="the first wait between attempts, in seconds (doubling each time)."), Runtime()
]
GiveUpAfter = Annotated[
    int,
    Field(description="failed requests in a row after which the service is not asked again in the run."),
    Runtime(),
]

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


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
        advice: str,
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
