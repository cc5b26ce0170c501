"""Reloads swap versions without a gap; unloads finish the requests in flight (up to the unload
timeout) and then answer with Triton's not-found error; the churn test keeps 16 clients busy
through 20 reloads and 20 unload/load cycles."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

from .helpers import UNKNOWN_MODEL, identity_config, identity_files, infer

FOUR_INSTANCES = "instance_group [ { kind: KIND_CPU count: 4 } ]"


def _server(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], *flags: str, delay_ms: int
) -> ServerProcess:
    model_repository.add_model("model", identity_config(delay_ms, extra=FOUR_INSTANCES), identity_files(1))
    return naiad_server(model_repository.root, args=("--model-control-mode=explicit", "--load-model=model", *flags))


def _infer_over_http(url: str, values: list[float]) -> Any:
    """One request on a client of its own, made and closed on the calling thread (a tritonclient HTTP
    client's gevent hub belongs to the thread that made it)."""
    with contextlib.closing(httpclient.InferenceServerClient(url)) as client:
        return infer(client, "model", values)


def _unload(url: str) -> None:
    with contextlib.closing(httpclient.InferenceServerClient(url)) as client:
        client.unload_model("model")


def test_unload_finishes_requests_in_flight_then_refuses(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = _server(model_repository, naiad_server, delay_ms=600)
    with ThreadPoolExecutor(4) as pool:
        in_flight = [pool.submit(_infer_over_http, server.http_url, [float(i)]) for i in range(4)]
        time.sleep(0.3)
        started = time.monotonic()
        _unload(server.http_url)
        assert time.monotonic() - started > 0.1  # it waited for the requests
        assert [future.result().tolist() for future in in_flight] == [[0.0], [1.0], [2.0], [3.0]]
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        with (
            contextlib.closing(module.InferenceServerClient(url)) as client,
            pytest.raises(InferenceServerException) as caught,
        ):
            infer(client, "model", [1.0])
        assert caught.value.message() == "Request for unknown model: 'model' has no available versions"


def test_unload_timeout_returns_while_a_slow_request_finishes(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = _server(model_repository, naiad_server, "--model-unload-timeout-secs=0.2", delay_ms=1500)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_infer_over_http, server.http_url, [4.0])
        time.sleep(0.3)
        started = time.monotonic()
        _unload(server.http_url)
        assert time.monotonic() - started < 1.0
        assert slow.result().tolist() == [4.0]
    assert "still has requests running" in server.logs()


def test_reload_under_load_drops_nothing(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = _server(model_repository, naiad_server, delay_ms=200)
    with (
        contextlib.closing(httpclient.InferenceServerClient(server.http_url)) as control,
        _Clients(server, threads=4) as clients,
    ):
        for _ in range(3):
            control.load_model("model")
    assert clients.failures == []
    assert clients.successes > 4


def test_churn(model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]) -> None:
    """16 clients (HTTP and gRPC) through 20 reloads, then 20 unload/load cycles."""
    server = _server(model_repository, naiad_server, delay_ms=1)
    with (
        contextlib.closing(httpclient.InferenceServerClient(server.http_url)) as control,
        _Clients(server, threads=16) as clients,
    ):
        for _ in range(20):
            control.load_model("model")
        assert clients.failures == [], "a reload dropped requests"
        clients.allow_unknown_model = True
        for _ in range(20):
            control.unload_model("model")
            time.sleep(0.02)
            control.load_model("model")
            time.sleep(0.02)
    assert clients.failures == []
    assert clients.successes > 100
    assert "Traceback" not in server.logs()


class _Clients:
    """Threads that keep sending requests (half over HTTP, half over gRPC) and keep every failure."""

    def __init__(self, server: ServerProcess, threads: int) -> None:
        self._server = server
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]
        self._lock = threading.Lock()
        self.successes = 0
        self.failures: list[str] = []
        self.allow_unknown_model = False

    def __enter__(self) -> _Clients:
        # Garbage of earlier tests (tritonclient HTTP clients sit in reference cycles) is collected here,
        # on the thread that made it: collected on a client thread, a client's gevent hub breaks.
        gc.collect()
        for thread in self._threads:
            thread.start()
        while self.successes < len(self._threads):  # every client has been served once
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, index: int) -> None:
        client: Any = (
            httpclient.InferenceServerClient(self._server.http_url)
            if index % 2
            else grpcclient.InferenceServerClient(self._server.grpc_url)
        )
        try:
            while not self._stop.is_set():
                self._send(client, index)
        finally:
            client.close()  # on this thread: an HTTP client's gevent hub belongs to the thread that made it

    def _send(self, client: Any, index: int) -> None:
        try:
            assert infer(client, "model", [float(index)]).tolist() == [float(index)]
        except InferenceServerException as error:
            message = error.message() or ""
            if not (self.allow_unknown_model and message.startswith(UNKNOWN_MODEL)):
                with self._lock:
                    self.failures.append(f"{error.status()}: {message}")
            return
        with self._lock:
            self.successes += 1
