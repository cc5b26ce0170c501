"""The real server in a thread of the test process, for backends registered in-process.

:func:`serve_in_thread` runs :class:`naiad.server.Server` (HTTP, gRPC and metrics on free ports)
on its own event loop thread. Tests reach it over real sockets with tritonclient, and in-process
through :attr:`ThreadedServer.handle`, the same :class:`~naiad.server_handle.ServerHandle` backends
get. ``plugins`` registers backends without installing them::

    with serve_in_thread([repository], plugins={"stepper": stepper_module}) as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from naiad.dataplane import ServerState
from naiad.plugins import BackendRegistry, BackendSettings
from naiad.server import Server, ServerOptions
from naiad.server_handle import ServerHandle
from naiad.testing.ports import free_ports


@dataclass(frozen=True, slots=True)
class ThreadedServer:
    """A running in-process server and where to reach it."""

    server: Server
    http_port: int
    grpc_port: int
    metrics_port: int

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def handle(self) -> ServerHandle:
        return self.server.handle


@contextmanager
def serve_in_thread(
    repositories: Sequence[Path],
    *,
    plugins: Mapping[str, object] | None = None,
    timeout: float = 60.0,
    **options: Any,
) -> Iterator[ThreadedServer]:
    """Serve ``repositories`` until the block ends; ``options`` are :class:`ServerOptions` fields."""
    http_port, grpc_port, metrics_port = free_ports(3)
    server_options = ServerOptions(
        model_repositories=tuple(repositories),
        http_address="127.0.0.1",
        grpc_address="127.0.0.1",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        **options,
    )
    registry = BackendRegistry(settings=BackendSettings(server_options.backend_config))
    for name, plugin in (plugins or {}).items():
        registry.register(name, plugin)
    server = Server(server_options, registry)
    failure: list[BaseException] = []
    loop = asyncio.new_event_loop()

    def run() -> None:
        try:
            loop.run_until_complete(server.run())
        except BaseException as error:
            failure.append(error)
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="naiad-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while server.dataplane.state is not ServerState.READY:
        if failure or not thread.is_alive():
            raise RuntimeError(f"the in-process server stopped while starting: {failure}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the in-process server was not ready within {timeout} s")
        time.sleep(0.02)
    try:
        yield ThreadedServer(server, http_port, grpc_port, metrics_port)
    finally:
        if not loop.is_closed():
            loop.call_soon_threadsafe(server.request_stop)
        thread.join(timeout)
