"""Python models in the real server, asked with Triton's clients: statistics and readiness.

Every test runs twice: with the models in the server process and in worker processes.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ThreadedServer, serve_in_thread

from .models import ADD_SUB, ASYNC_DECOUPLED, ASYNC_EXECUTE, isolated, readiness_model, write_model

NOT_READY = readiness_model("async def is_ready(self):\n    return False")
REQUESTS = 3


@pytest.fixture(scope="module", params=["thread", "process"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repo: Path = tmp_path_factory.mktemp("models")
    for name, spec in {
        "add_sub": ADD_SUB,
        "timed": ADD_SUB,
        "async": ASYNC_EXECUTE,
        "async_decoupled": ASYNC_DECOUPLED,
        "not_ready": NOT_READY,
    }.items():
        write_model(repo, name, isolated(spec, request.param))
    with serve_in_thread([repo]) as running:
        yield running


def _inputs(module: Any, **arrays: np.ndarray[Any, Any]) -> list[Any]:
    inputs = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def _inference_stats(client: httpclient.InferenceServerClient, model: str) -> dict[str, Any]:
    """The model's inference_stats once all ``REQUESTS`` requests are counted."""
    deadline = time.monotonic() + 10
    while True:
        stats: dict[str, Any] = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
        if stats["success"]["count"] == REQUESTS or time.monotonic() > deadline:
            return stats
        time.sleep(0.02)


def _assert_compute_phases(stats: dict[str, Any]) -> None:
    assert stats["success"]["count"] == REQUESTS
    for phase in ("compute_input", "compute_infer", "compute_output"):
        assert stats[phase]["count"] == REQUESTS
        assert stats[phase]["ns"] > 0, phase


@pytest.mark.parametrize(
    ("model", "arrays"),
    [
        ("add_sub", {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}),
        ("async", {"INPUT0": np.ones(4, np.float32)}),
    ],
)
def test_statistics_have_compute_input_and_output(
    http: httpclient.InferenceServerClient, model: str, arrays: dict[str, np.ndarray[Any, Any]]
) -> None:
    for _ in range(REQUESTS):
        http.infer(model, _inputs(httpclient, **arrays))
    _assert_compute_phases(_inference_stats(http, model))


def test_a_worker_batch_counts_its_trip_to_the_worker_as_compute_infer(
    request: pytest.FixtureRequest, http: httpclient.InferenceServerClient
) -> None:
    """As Triton's python backend times its stub: compute infer runs from the batch leaving for the
    worker until its end is back, so a quick model's time is not all compute input and output."""
    arrays = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}
    for _ in range(REQUESTS):
        http.infer("timed", _inputs(httpclient, **arrays))
    stats = _inference_stats(http, "timed")
    _assert_compute_phases(stats)
    if request.node.callspec.params["server"] == "process":
        assert stats["compute_infer"]["ns"] > stats["compute_input"]["ns"], stats


def test_decoupled_async_statistics_have_compute_input_and_output(
    server: ThreadedServer, http: httpclient.InferenceServerClient
) -> None:
    finals: queue.Queue[Any] = queue.Queue()

    def callback(result: Any, error: Any) -> None:
        if error is not None or result.get_response().parameters["triton_final_response"].bool_param:
            finals.put(error)

    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback)
    try:
        for index in range(REQUESTS):
            inputs = _inputs(grpcclient, IN=np.array([2], np.int32))
            client.async_stream_infer(
                "async_decoupled", inputs, request_id=str(index), enable_empty_final_response=True
            )
        assert [finals.get(timeout=10) for _ in range(REQUESTS)] == [None] * REQUESTS
    finally:
        client.stop_stream()
        client.close()
    _assert_compute_phases(_inference_stats(http, "async_decoupled"))


def test_model_readiness_asks_the_models_is_ready(http: httpclient.InferenceServerClient) -> None:
    assert http.is_model_ready("add_sub")
    assert not http.is_model_ready("not_ready")
