"""Serving the explorer with uvicorn on 127.0.0.1: in the foreground (``cast explore``) or in a thread (tests).

A connection must send each request's head (its request line and headers) within :data:`HEAD_TIMEOUT_S` of
opening, or of the previous response: uvicorn times out only idle keep-alive connections, so a client that
trickles its headers (or sends none) would hold its connection for ever (the body has its own time limit:
:class:`cast.explore.api.BodySizeLimit`).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

HOST = "127.0.0.1"
HEAD_TIMEOUT_S = 10.0


def serve(app: Any, port: int) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` until interrupted."""
    import uvicorn

    uvicorn.run(app, host=HOST, port=port, log_level="warning", http=timed_protocol(HEAD_TIMEOUT_S))


def timed_protocol(head_timeout: float) -> type:
    """uvicorn's HTTP/1.1 protocol (h11), closing a connection whose request head has not all arrived within
    ``head_timeout`` seconds of the connection opening or of the last response."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        head_deadline: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._expect_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._expect_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is in
                self._cancel_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_deadline()
            super().connection_lost(exc)

        def _expect_head(self) -> None:
            self._cancel_deadline()
            if not self.transport.is_closing():
                self.head_deadline = self.loop.call_later(head_timeout, self._too_slow)

        def _cancel_deadline(self) -> None:
            if self.head_deadline is not None:
                self.head_deadline.cancel()
                self.head_deadline = None

        def _too_slow(self) -> None:
            self.head_deadline = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol


class BackgroundServer:
    """``app`` served by uvicorn in a daemon thread on a free port of 127.0.0.1, ready when entered.

    Example:
        >>> with BackgroundServer(create_app(explorer)) as server:  # doctest: +SKIP
        ...     requests.get(server.url + "api/health")
    """

    def __init__(self, app: Any, start_timeout: float = 30.0, head_timeout: float = HEAD_TIMEOUT_S):
        self.app = app
        self.start_timeout = start_timeout
        self.head_timeout = head_timeout
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((HOST, 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}/"
        self._server: Any = None
        self._thread = threading.Thread()  # replaced by the server's own on entering

    def __enter__(self) -> BackgroundServer:
        import uvicorn

        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="on", http=timed_protocol(self.head_timeout)
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="cast-explore-server",
            daemon=True,
        )
        self._thread.start()
        self._wait_until_healthy()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def _wait_until_healthy(self) -> None:
        """Poll the health endpoint until it answers (the thread may still be starting the event loop)."""
        import httpx

        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                if httpx.get(self.url + "api/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if not self._thread.is_alive():
                raise RuntimeError("the explorer's server thread stopped while starting")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the explorer's server did not answer at {self.url} within {self.start_timeout} s"
                )
            time.sleep(0.05)
