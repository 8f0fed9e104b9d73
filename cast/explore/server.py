"""Serving the explorer with uvicorn on 127.0.0.1: in the foreground (``cast explore``) or in a thread (tests)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

HOST = "127.0.0.1"


def serve(app: Any, port: int) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` until interrupted."""
    import uvicorn

    uvicorn.run(app, host=HOST, port=port, log_level="warning")


class BackgroundServer:
    """``app`` served by uvicorn in a daemon thread on a free port of 127.0.0.1, ready when entered.

    Example:
        >>> with BackgroundServer(create_app(explorer)) as server:  # doctest: +SKIP
        ...     requests.get(server.url + "api/health")
    """

    def __init__(self, app: Any, start_timeout: float = 30.0):
        self.app = app
        self.start_timeout = start_timeout
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((HOST, 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}/"
        self._server: Any = None
        self._thread = threading.Thread()  # replaced by the server's own on entering

    def __enter__(self) -> BackgroundServer:
        import uvicorn

        config = uvicorn.Config(self.app, log_level="warning", lifespan="on")
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
