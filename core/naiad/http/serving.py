"""Running the ASGI app under uvicorn or hypercorn inside the server's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn
from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config as HypercornConfig

from naiad.http.infer import ASGIApp

logger = logging.getLogger(__name__)

HTTP_SERVERS = ("uvicorn", "hypercorn")


def bind_socket(host: str, port: int, what: str, flag: str) -> socket.socket:
    """A listening TCP socket, or a :class:`OSError` that says which flag to change."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(
            error.errno,
            f"cannot listen for {what} on {host}:{port}: {error.strerror}; another process may hold "
            f"the port (check with `ss -ltnp`), or choose another with {flag}",
        ) from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the naiad server owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpFrontend:
    """One HTTP listener serving the app with the chosen server implementation."""

    def __init__(self, app: ASGIApp, sock: socket.socket, implementation: str) -> None:
        if implementation not in HTTP_SERVERS:
            raise ValueError(f"unknown --http-server '{implementation}'; choose one of {', '.join(HTTP_SERVERS)}")
        self._app = app
        self._sock = sock
        self._implementation = implementation
        self._task: asyncio.Task[None] | None = None
        self._uvicorn: _EmbeddedUvicorn | None = None
        self._hypercorn_stop = asyncio.Event()

    def describe(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"HTTP on {host}:{port} ({self._implementation})"

    async def start(self) -> None:
        if self._implementation == "uvicorn":
            uvicorn_config = uvicorn.Config(
                self._app,
                http="httptools",
                lifespan="off",
                access_log=False,
                log_config=None,
                timeout_graceful_shutdown=5,
            )
            self._uvicorn = _EmbeddedUvicorn(uvicorn_config)
            self._task = asyncio.create_task(self._uvicorn.serve(sockets=[self._sock]))
        else:
            hypercorn_config = HypercornConfig()
            hypercorn_config.bind = [f"fd://{self._sock.fileno()}"]
            hypercorn_config.accesslog = None
            hypercorn_config.graceful_timeout = 5
            self._task = asyncio.create_task(
                hypercorn_serve(self._app, hypercorn_config, shutdown_trigger=self._hypercorn_stop.wait)  # type: ignore[arg-type]
            )
        await asyncio.sleep(0)

    async def stop(self) -> None:
        """Stop accepting connections and let open ones finish."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        self._hypercorn_stop.set()
        if self._task is not None:
            await self._task
        self._sock.close()
