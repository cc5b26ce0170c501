"""A backend that brings its own scheduler: iteration-level batching on the server's event loop.

The ``stepper`` backend (tests/sdk/backends.py) admits requests into a running batch that advances one
token per step; a request that arrives mid-flight joins the next step instead of waiting for the batch
to finish. Served by the real server, reached with tritonclient over gRPC streaming.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import BlockingSink, Tensor
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

from .backends import STEPPER_CONFIG, StepperBackend

TIMEOUT_S = 10


@pytest.fixture(scope="module")
def stepper() -> StepperBackend:
    return StepperBackend()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, stepper: StepperBackend) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("stepper") / "models")
    repository.add_model("generator", STEPPER_CONFIG, {"1/.keep": ""})
    untyped = STEPPER_CONFIG.replace('platform: "stepper_v1"', "")
    repository.add_model("from_file", untyped, {"1/model.step": "weights"})
    with serve_in_thread([repository.root], plugins={"stepper": stepper}) as running:
        yield running


def _length(value: int) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("LENGTH", [1], "INT32")
    tensor.set_data_from_numpy(np.array([value], dtype=np.int32))
    return [tensor]


def test_a_request_arriving_mid_flight_joins_the_running_batch(server: ThreadedServer) -> None:
    answers: queue.Queue[tuple[str, int, int, bool]] = queue.Queue()

    def collect(result: grpcclient.InferResult | None, error: Exception | None) -> None:
        assert error is None, error
        assert result is not None
        response = result.get_response()
        answers.put(
            (
                response.id,
                int(result.as_numpy("TOKEN")[0]),
                int(response.parameters["batch"].int64_param),
                response.parameters["triton_final_response"].bool_param,
            )
        )

    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=collect)
    try:
        client.async_stream_infer("generator", _length(30), request_id="long")
        first = answers.get(timeout=TIMEOUT_S)
        assert first == ("long", 0, 1, False)  # alone in its batch
        client.async_stream_infer("generator", _length(3), request_id="short")
        seen: dict[str, list[tuple[int, int, bool]]] = {"long": [first[1:]], "short": []}
        while not (seen["long"] and seen["long"][-1][2]):
            request_id, token, batch, final = answers.get(timeout=TIMEOUT_S)
            seen[request_id].append((token, batch, final))
    finally:
        client.stop_stream()
        client.close()
    assert [token for token, _, _ in seen["long"]] == list(range(30))
    assert [token for token, _, _ in seen["short"]] == [0, 1, 2]
    assert [final for _, _, final in seen["short"]] == [False, False, True]
    assert all(batch == 2 for _, batch, _ in seen["short"])  # ran alongside the long one, step by step
    assert any(batch == 1 for _, batch, _ in seen["long"][1:])  # ... which ran on alone once it finished


def test_statistics_count_what_the_scheduler_reports(server: ThreadedServer, stepper: StepperBackend) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("generator")["model_stats"][0]
    sink = BlockingSink()
    server.handle.submit("generator", [Tensor("LENGTH", "INT32", np.array([4], dtype=np.int32))], sink)
    events = [sink.next_event(TIMEOUT_S) for _ in range(4)]
    assert [event.final for event in events] == [False, False, False, True]
    after = client.get_inference_statistics("generator")["model_stats"][0]
    assert after["inference_stats"]["success"]["count"] == before["inference_stats"]["success"]["count"] + 1
    assert after["execution_count"] == before["execution_count"] + 1
    assert int(after["inference_stats"]["compute_infer"]["ns"]) >= 3 * 10_000_000  # four steps of 10 ms


def test_cancelling_a_running_sequence_stops_it_at_the_next_step(server: ThreadedServer) -> None:
    sink = BlockingSink()
    request = server.handle.submit("generator", [Tensor("LENGTH", "INT32", np.array([10_000], dtype=np.int32))], sink)
    assert sink.next_event(TIMEOUT_S).response is not None
    request.cancel()
    while not (event := sink.next_event(TIMEOUT_S)).final:
        pass
    assert event.response is not None
    assert event.response.error is not None
    assert event.response.error.message == "Request was cancelled"


def test_the_backend_claims_its_platform_and_its_model_file(server: ThreadedServer) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    for model in ("generator", "from_file"):
        config = client.get_model_config(model)
        assert (config["backend"], config["platform"], config["default_model_filename"]) == (
            "stepper",
            "stepper_v1",
            "model.step",
        )
        assert config["instance_group"][0]["kind"] == "KIND_CPU"  # the backend's default instance kind
        assert client.get_model_metadata(model)["platform"] == "stepper_v1"
