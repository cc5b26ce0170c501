"""Running the ASGI app under uvicorn or hypercorn inside the server's own event loop.

Both get the HTTP limits their configuration can carry. uvicorn (the default) runs
:mod:`naiad.http.connections`' protocol: connection cap, header size, count and time limits, the
idle timeout, Triton's chunk cap and a graceful close of idle connections at shutdown. hypercorn
takes the header size (``h11_max_incomplete_size`` bounds a head still arriving,
``h2_max_header_list_size``) and the idle timeout (``keep_alive_timeout``, which also bounds the wait
for a request's headers); :class:`_HeaderLimits` refuses complete heads over the size or count limit.
hypercorn has no connection cap or chunk cap, and closes idle connections at once at shutdown.
Body size and body pauses are bounded by the app for both. Neither sends a ``server`` header.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import socket
from collections.abc import Iterator

import uvicorn
from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config as HypercornConfig

from naiad.http.asgi import CLOSE, JSON_HEADERS, ASGIApp, Receive, Scope, Send, respond
from naiad.http.connections import headers_too_large, limited_protocol, too_many_headers
from naiad.http.infer import error_body
from naiad.http.router import HttpRouter
from naiad.limits import HttpLimits

logger = logging.getLogger(__name__)

HTTP_SERVERS = ("uvicorn", "hypercorn")


def bind_socket(host: str, port: int, what: str, flag: str, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket, or a :class:`OSError` that says which flag to change; ``reuse_port``:
    other processes may listen on the same port (SO_REUSEPORT, Triton's ``--reuse-http-port``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
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

    def __init__(
        self, app: ASGIApp, sock: socket.socket, implementation: str, limits: HttpLimits | None = None
    ) -> None:
        if implementation not in HTTP_SERVERS:
            raise ValueError(f"unknown --http-server '{implementation}'; choose one of {', '.join(HTTP_SERVERS)}")
        self._app = app
        self._sock = sock
        self._implementation = implementation
        self._limits = limits or HttpLimits()
        self._task: asyncio.Task[None] | None = None
        self._uvicorn: _EmbeddedUvicorn | None = None
        self._hypercorn_stop = asyncio.Event()

    def describe(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"HTTP on {host}:{port} ({self._implementation})"

    async def start(self) -> None:
        limits = self._limits
        _check_open_file_limit(limits.max_connections)
        if self._implementation == "uvicorn":
            uvicorn_config = uvicorn.Config(
                self._app,
                http=limited_protocol(
                    limits, self.describe(), self._app.infer_lane() if isinstance(self._app, HttpRouter) else None
                ),
                lifespan="off",
                access_log=False,
                log_config=None,
                timeout_graceful_shutdown=5,
                server_header=False,
                proxy_headers=False,  # naiad reads no client address; the middleware costs every request
            )
            self._uvicorn = _EmbeddedUvicorn(uvicorn_config)
            self._task = asyncio.create_task(self._uvicorn.serve(sockets=[self._sock]))
        else:
            hypercorn_config = HypercornConfig()
            # hypercorn wraps the descriptor it is given and closes it at shutdown: give it a duplicate
            hypercorn_config.bind = [f"fd://{os.dup(self._sock.fileno())}"]
            hypercorn_config.accesslog = None
            hypercorn_config.graceful_timeout = 5
            hypercorn_config.include_server_header = False
            hypercorn_config.keep_alive_timeout = limits.idle_timeout_s
            hypercorn_config.h11_max_incomplete_size = limits.max_header_size
            hypercorn_config.h2_max_header_list_size = limits.max_header_size
            app = _HeaderLimits(self._app, limits)
            self._task = asyncio.create_task(
                hypercorn_serve(app, hypercorn_config, shutdown_trigger=self._hypercorn_stop.wait)  # type: ignore[arg-type]
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


@functools.cache  # once per process, not per listener
def _check_open_file_limit(max_connections: int) -> None:
    """Warn when the connection cap cannot protect the process's file descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * max_connections + 64  # the HTTP and metrics listeners, and some for everything else
    if soft != resource.RLIM_INFINITY and needed > soft:
        logger.warning(
            "the HTTP and metrics listeners may each hold --http-max-connections=%d connections but this process "
            "may open only %d files; raise the limit (ulimit -n) or lower --http-max-connections, or new "
            "connections will fail before the cap refuses them",
            max_connections,
            soft,
        )


class _HeaderLimits:
    """For hypercorn: a request head over ``--http-max-header-size`` or ``--http-max-headers`` gets 431.

    uvicorn's protocol refuses such heads while it parses them; hypercorn hands them over whole.
    """

    def __init__(self, app: ASGIApp, limits: HttpLimits) -> None:
        self._app = app
        self._limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope["headers"]
            size = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b""))
            size += sum(len(name) + len(value) + 4 for name, value in headers)
            message = None
            if len(headers) > self._limits.max_headers:
                message = too_many_headers(self._limits.max_headers)
            elif size > self._limits.max_header_size:
                message = headers_too_large(self._limits.max_header_size)
            if message is not None:
                await respond(send, 431, [*JSON_HEADERS, CLOSE], error_body(message))
                return
        await self._app(scope, receive, send)
