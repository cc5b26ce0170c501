"""The SDK surface, through the ``asyncecho`` and ``slowready`` backends served by the real server.

Async instances run on the server loop; readiness never blocks it; a backend is initialized before its
first model and finalized at shutdown; ``configured`` sees the final config; instances learn their group
and index; custom metrics appear on the metrics endpoint; plugin HTTP routes are served.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from naiad.backend import ServerHandle, hookimpl
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

from .backends import ECHO_CONFIG, SLOW_CONFIG, AsyncEchoBackend, AsyncEchoModel, SlowReadyBackend


class RoutesPlugin:
    """Contributes ``/v1/hello`` (served) and ``/v2/hijack`` (refused: KServe's namespace)."""

    @hookimpl
    def naiad_http_routes(self, server: ServerHandle) -> Sequence[BaseRoute]:
        async def hello(request: Request) -> Response:
            return JSONResponse(
                {"hello": request.query_params.get("name", "world"), "ready": server.model_ready("echo")}
            )

        async def hijack(request: Request) -> Response:
            return JSONResponse({"hijacked": True})

        return [Route("/v1/hello", hello), Route("/v2/hijack", hijack)]


@pytest.fixture(scope="module")
def echo() -> AsyncEchoBackend:
    return AsyncEchoBackend()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, echo: AsyncEchoBackend) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("surface") / "models")
    repository.add_model("echo", ECHO_CONFIG.format(extra=""), {"1/.keep": ""})
    repository.add_model("slow", SLOW_CONFIG, {"1/.keep": ""})
    plugins = {"asyncecho": echo, "slowready": SlowReadyBackend(), "routes": RoutesPlugin()}
    options = {"backend_config": {"asyncecho": {"greeting": "hi"}, "": {"shared": "yes"}}}
    with serve_in_thread([repository.root], plugins=plugins, **options) as server:
        yield server
    assert echo.events[-1] == "finalize"  # at shutdown, after the models unloaded


def _echo_inputs(value: float) -> list[httpclient.InferInput]:
    tensor = httpclient.InferInput("IN", [1, 3], "FP32")
    tensor.set_data_from_numpy(np.full((1, 3), value, dtype=np.float32))
    return [tensor]


def test_async_instances_execute_on_the_server_loop(served: ThreadedServer, echo: AsyncEchoBackend) -> None:
    client = httpclient.InferenceServerClient(served.http_url, concurrency=4)
    pending = [client.async_infer("echo", _echo_inputs(float(i))) for i in range(8)]
    for index, result in enumerate(pending):
        np.testing.assert_array_equal(result.get_result().as_numpy("OUT"), np.full((1, 3), index, dtype=np.float32))
    assert echo.execute_threads == {served.handle.inbox.loop_thread}


def test_the_backend_was_initialized_with_its_settings(served: ThreadedServer, echo: AsyncEchoBackend) -> None:
    assert echo.events[:2] == ["initialize", "load echo"]
    assert echo.backend_config == {"greeting": "hi", "shared": "yes"}


def test_configured_sees_the_final_config(served: ThreadedServer, echo: AsyncEchoBackend) -> None:
    model = served.server.lifecycle.lookup("echo").backend_model
    assert isinstance(model, AsyncEchoModel)
    assert model.final_config is not None
    assert list(model.final_config.dynamic_batching.preferred_batch_size) == [8]  # a default naiad filled in


def test_instances_know_their_group_and_index(served: ThreadedServer, echo: AsyncEchoBackend) -> None:
    seen = [(c.name, c.group, c.group_index, c.index) for c in echo.contexts]
    assert seen == [("first_0", "first", 0, 0), ("first_1", "first", 0, 1), ("second_0", "second", 1, 0)]


def test_custom_metrics_are_exported_with_their_exact_names(served: ThreadedServer) -> None:
    client = grpcclient.InferenceServerClient(served.grpc_url)
    tensor = grpcclient.InferInput("IN", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1), dtype=np.float32))
    client.infer("echo", [tensor])
    with urllib.request.urlopen(served.metrics_url) as response:
        text = response.read().decode()
    assert "# TYPE asyncecho_requests counter" in text
    (line,) = [line for line in text.splitlines() if line.startswith("asyncecho_requests ")]
    assert float(line.split()[1]) >= 1


def test_async_readiness_is_asked_on_every_check(served: ThreadedServer, echo: AsyncEchoBackend) -> None:
    client = httpclient.InferenceServerClient(served.http_url)
    assert client.is_model_ready("echo")
    echo.ready = False
    try:
        assert not client.is_model_ready("echo")
        assert not grpcclient.InferenceServerClient(served.grpc_url).is_model_ready("echo")
    finally:
        echo.ready = True


def test_a_slow_readiness_check_never_blocks_the_event_loop(served: ThreadedServer) -> None:
    ready: list[bool] = []
    checker = threading.Thread(
        target=lambda: ready.append(httpclient.InferenceServerClient(served.http_url).is_model_ready("slow"))
    )
    checker.start()
    time.sleep(0.2)  # the check is now inside the instance's one-second is_ready()
    started = time.monotonic()
    assert httpx.get(f"http://{served.http_url}/v2/health/live").status_code == 200
    assert time.monotonic() - started < 0.5
    checker.join(5)
    assert ready == [True]


def test_plugins_contribute_http_routes_outside_kserve(served: ThreadedServer) -> None:
    response = httpx.get(f"http://{served.http_url}/v1/hello", params={"name": "naiad"})
    assert response.json() == {"hello": "naiad", "ready": True}
    assert httpx.get(f"http://{served.http_url}/v2/hijack").status_code == 404
