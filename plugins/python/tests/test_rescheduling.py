"""Request rescheduling (``set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)``) on models with
``sequence_batching { iterative_sequence: true }``, through the real server, as Triton 2.51 runs them."""

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
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

COUNTING = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            sequence = request.correlation_id()
            wanted = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            runs = self.seen.get(sequence, 0) + 1
            self.seen[sequence] = runs
            if runs < wanted:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                continue
            del self.seen[sequence]
            outputs = [
                pb_utils.Tensor("RUNS", np.array([runs], dtype=np.int32)),
                pb_utils.Tensor("SEQUENCE", np.array([sequence], dtype=np.uint64)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""

STREAMING = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = {}

    def execute(self, requests):
        for request in requests:
            sequence = request.correlation_id()
            wanted = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            runs = self.seen.get(sequence, 0) + 1
            self.seen[sequence] = runs
            token = pb_utils.Tensor("TOKEN", np.array([runs * 10 + request.flags()], dtype=np.int32))
            if wanted > 100:
                time.sleep(0.01)  # a long generation, to be cancelled
            if runs < wanted:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                request.get_response_sender().send(pb_utils.InferenceResponse([token]))
            else:
                del self.seen[sequence]
                request.get_response_sender().send(
                    pb_utils.InferenceResponse([token]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
        return None
"""

RESCHEDULES_EVERYTHING = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        return [None for _ in requests]
"""

ANSWERS_A_RESCHEDULED_REQUEST = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RUNS", np.array([1], np.int32))]) for _ in requests]
"""

# Holds its request longer than its sequence may idle, then reschedules it.
OUTLIVES_ITS_SEQUENCE = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.5)
        for request in requests:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        return [None for _ in requests]
"""

ITERATIVE = "sequence_batching { iterative_sequence: true }\n"
N = 'input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
RUNS = '{ name: "RUNS" data_type: TYPE_INT32 dims: [ 1 ] }'
COUNTING_CONFIG = N + f'output [ {RUNS}, {{ name: "SEQUENCE" data_type: TYPE_UINT64 dims: [ 1 ] }} ]\n' + ITERATIVE
THREAD = 'parameters { key: "INSTANCE_ISOLATION" value: { string_value: "thread" } }\n'


def _write(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    builder.add_python_model("counting", COUNTING, 'backend: "python"\n' + COUNTING_CONFIG)
    builder.add_python_model("counting_thread", COUNTING, 'backend: "python"\n' + COUNTING_CONFIG + THREAD)
    builder.add_python_model(
        "streaming",
        STREAMING,
        'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
        + N
        + 'output [ { name: "TOKEN" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        + ITERATIVE,
    )
    builder.add_python_model("not_iterative", RESCHEDULES_EVERYTHING, f'backend: "python"\n{N}output [ {RUNS} ]\n')
    builder.add_python_model(
        "answers_too", ANSWERS_A_RESCHEDULED_REQUEST, f'backend: "python"\n{N}output [ {RUNS} ]\n{ITERATIVE}'
    )
    short_idle = "sequence_batching { iterative_sequence: true max_sequence_idle_microseconds: 200000 }\n"
    builder.add_python_model(
        "outlives", OUTLIVES_ITS_SEQUENCE, f'backend: "python"\n{N}output [ {RUNS} ]\n{short_idle}'
    )
    return builder.root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server([_write(tmp_path_factory.mktemp("rescheduling") / "models")])
    yield process
    process.stop()


def _count(n: int) -> httpclient.InferInput:
    tensor = httpclient.InferInput("N", [1], "INT32")
    tensor.set_data_from_numpy(np.array([n], np.int32))
    return tensor


@pytest.mark.parametrize("model", ["counting", "counting_thread"])
def test_a_rescheduled_request_runs_again_until_the_model_answers_it(server: ServerProcess, model: str) -> None:
    """No sequence id: the iterative batcher gives each request one of its own (1, 2, ...), as Triton."""
    client = httpclient.InferenceServerClient(server.http_url)
    first = client.infer(model, [_count(3)])
    second = client.infer(model, [_count(1)])
    assert int(first.as_numpy("RUNS")[0]) == 3
    assert int(second.as_numpy("RUNS")[0]) == 1
    assert int(second.as_numpy("SEQUENCE")[0]) == int(first.as_numpy("SEQUENCE")[0]) + 1
    given = client.infer(model, [_count(2)], sequence_id=42, sequence_start=True)
    assert (int(given.as_numpy("RUNS")[0]), int(given.as_numpy("SEQUENCE")[0])) == (2, 42)
    deadline = time.monotonic() + 10  # an execution is counted once it returned, after its response left
    while True:
        stats = client.get_inference_statistics(model)["model_stats"][0]
        if int(stats["execution_count"]) == 6 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert int(stats["execution_count"]) == 6  # every run is an execution of the model
    assert int(stats["inference_stats"]["success"]["count"]) == 3


def test_a_decoupled_model_streams_one_response_per_run(server: ServerProcess) -> None:
    """Each run sends a token; the request carries START on its first run only (flags 1, then 0)."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    events: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(lambda result, error: events.put((result, error)))
    tensor = grpcclient.InferInput("N", [1], "INT32")
    tensor.set_data_from_numpy(np.array([3], np.int32))
    client.async_stream_infer("streaming", [tensor], enable_empty_final_response=True)
    tokens = []
    while True:
        result, error = events.get(timeout=30)
        assert error is None
        response = result.get_response()
        tokens.append(int(result.as_numpy("TOKEN")[0]))
        if response.parameters["triton_final_response"].bool_param:
            break
    client.stop_stream()
    assert tokens == [11, 20, 30]


def test_rescheduling_on_a_model_without_iterative_sequences_fails_with_tritons_text(server: ServerProcess) -> None:
    """Triton 2.51 leaves such a client waiting; naiad answers with Triton's error."""
    with pytest.raises(InferenceServerException) as refused:
        httpclient.InferenceServerClient(server.http_url).infer("not_iterative", [_count(1)])
    assert refused.value.status() == "400"
    assert refused.value.message() == (
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to "
        "handle such a flag."
    )


def test_a_request_rescheduled_after_its_sequence_idled_out_gets_tritons_start_error(server: ServerProcess) -> None:
    """Triton's iterative-sequence QA (test_reschedule_error): the sequence ended while the model held
    the request, so the request coming back is refused as one without START."""
    with pytest.raises(InferenceServerException) as refused:
        httpclient.InferenceServerClient(server.http_url).infer("outlives", [_count(1)])
    assert refused.value.status() == "400"
    assert refused.value.message() == (
        "inference request for sequence 1 to model 'outlives' must specify the START flag on the first request of "
        "the sequence"
    )


def test_a_response_for_a_rescheduled_request_is_a_contract_error(server: ServerProcess) -> None:
    with pytest.raises(InferenceServerException) as refused:
        httpclient.InferenceServerClient(server.http_url).infer("answers_too", [_count(1)])
    assert "Expected a None object in the execute function return list for reschduled request" in (
        refused.value.message()
    )


def test_cancelling_the_client_stops_the_runs(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    events: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(lambda result, error: events.put((result, error)))
    tensor = grpcclient.InferInput("N", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1_000_000], np.int32))
    client.async_stream_infer("streaming", [tensor])
    for _ in range(3):
        _, error = events.get(timeout=30)
        assert error is None
    client.stop_stream(cancel_requests=True)
    http = httpclient.InferenceServerClient(server.http_url)

    def executions() -> int:
        return int(http.get_inference_statistics("streaming")["model_stats"][0]["execution_count"])

    deadline = time.monotonic() + 10
    settled = executions()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = executions()
        if now == settled:
            break
        settled = now
    assert now == settled < 1000  # it stopped long before a million runs
    stats = http.get_inference_statistics("streaming")["model_stats"][0]["inference_stats"]
    assert int(stats["fail"]["count"]) == 1  # the cancelled request was answered, and counted
