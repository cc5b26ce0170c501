"""The generate extension over HTTP, decoupled models on /infer, and cancellation on disconnect."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "model_repository"

TICKER = """
import threading
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.report = Path(args["model_repository"]) / "report.txt"

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._tick, args=(request.get_response_sender(),)).start()

    def _tick(self, sender):
        sent = 0
        while sent < 200 and not sender.is_cancelled():
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TICK", np.array([sent], dtype=np.int32))]))
            sent += 1
            time.sleep(0.02)
        self.report.write_text(f"{sent} {sender.is_cancelled()}")
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

TICKER_CONFIG = """
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "START" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TICK" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

SLOW_RECORDER = """
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.log = Path(args["model_repository"]) / "executed.txt"

    def execute(self, requests):
        for request in requests:
            with self.log.open("a") as log:
                log.write(request.request_id() + "\\n")
        time.sleep(1.0)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""

SLOW_CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


# Answers the request's parameters as text, and a half-precision copy of its input.
PARAMETERS_AND_HALF = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            text = np.array([request.parameters().encode()], dtype=np.object_)
            outputs = [pb_utils.Tensor("PARAMETERS", text)]
            if data.flat[0] < 0:
                outputs.append(pb_utils.Tensor("HALF", data.astype(np.float16)))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""

PARAMETERS_AND_HALF_CONFIG = """
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMETERS" data_type: TYPE_STRING dims: [ 1 ] }, { name: "HALF" data_type: TYPE_FP16 dims: [ 1 ] } ]
"""


@pytest.fixture
def server(model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]) -> ServerProcess:
    for example in ("add_sub", "word_stream"):
        model_repository.add_model(
            example,
            (EXAMPLES / example / "config.pbtxt").read_text(),
            {"1/model.py": (EXAMPLES / example / "1" / "model.py").read_text()},
        )
    model_repository.add_python_model("ticker", TICKER, TICKER_CONFIG)
    model_repository.add_python_model("slow_recorder", SLOW_RECORDER, SLOW_CONFIG)
    model_repository.add_python_model("echo", PARAMETERS_AND_HALF, PARAMETERS_AND_HALF_CONFIG)
    return naiad_server(model_repository.root)


def _url(server: ServerProcess, model: str, endpoint: str) -> str:
    return f"http://{server.http_url}/v2/models/{model}/{endpoint}"


def test_generate_maps_keys_to_inputs_and_outputs_to_keys(server: ServerProcess) -> None:
    response = httpx.post(_url(server, "add_sub", "generate"), json={"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]})
    assert response.status_code == 200
    assert response.json() == {
        "OUTPUT0": [2.0, 3.0, 4.0, 5.0],
        "OUTPUT1": [0.0, 1.0, 2.0, 3.0],
        "model_name": "add_sub",
        "model_version": "1",
    }


def test_generate_on_a_decoupled_model_with_one_response(server: ServerProcess) -> None:
    response = httpx.post(_url(server, "word_stream", "generate"), json={"text_input": "hello", "id": "g1"})
    assert response.json() == {"id": "g1", "model_name": "word_stream", "model_version": "1", "text_output": "hello"}


def test_generate_refuses_several_responses_like_triton(server: ServerProcess) -> None:
    response = httpx.post(_url(server, "word_stream", "generate"), json={"text_input": "two words"})
    assert response.status_code == 200
    assert response.json()["error"].startswith("generate expects model to produce exactly 1 response")


def test_generate_hands_every_parameter_to_the_model_as_triton_does(server: ServerProcess) -> None:
    # Generate has no scheduling parameters: sequence_id, priority, timeout and triton_ keys are the model's.
    body = {
        "X": 1.0,
        "sequence_id": 7,
        "priority": 2,
        "parameters": {"timeout": 5, "triton_note": "kept", "binary_data_output": True},
    }
    response = httpx.post(_url(server, "echo", "generate"), json=body)
    assert response.status_code == 200
    assert json.loads(response.json()["PARAMETERS"]) == {
        "sequence_id": 7,
        "priority": 2,
        "timeout": 5,
        "triton_note": "kept",
        "binary_data_output": True,
    }


def test_generate_reads_an_integer_beyond_int64_as_a_double_as_triton_does(server: ServerProcess) -> None:
    body = {"X": 1.0, "big": 2**63 + 5, "small": -(2**63) - 1, "edge": 2**63 - 1, "neg": -3}
    response = httpx.post(_url(server, "echo", "generate"), json=body)
    assert response.status_code == 200
    assert json.loads(response.json()["PARAMETERS"]) == {
        "big": 9.223372036854776e18,
        "small": -9.223372036854776e18,
        "edge": 2**63 - 1,
        "neg": -3,
    }


def test_generate_refuses_half_precision_outputs_as_triton_does(server: ServerProcess) -> None:
    error = {"error": "sending FP16 data via JSON is not supported. Please use the binary data format for output"}
    response = httpx.post(_url(server, "echo", "generate"), json={"X": -1.0})
    assert (response.status_code, response.json()) == (400, error)
    with httpx.stream("POST", _url(server, "echo", "generate_stream"), json={"X": -1.0}) as streamed:
        assert streamed.status_code == 400
        assert [json.loads(line[len("data: ") :]) for line in streamed.iter_lines() if line] == [error]


def test_generate_with_a_shape_that_does_not_fit(server: ServerProcess) -> None:
    response = httpx.post(_url(server, "word_stream", "generate"), json={"text_input": ["a", "b"]})
    assert response.status_code == 400
    assert response.json() == {"error": "The schema can not convert input 'text_input' to tensor with proper shape"}


@pytest.mark.parametrize(
    ("text_input", "error"),
    [
        ([[]], "expected 1 string elements for inference input 'text_input' for model 'word_stream', got 0"),
        (
            [["a", "b"]],
            "unexpected number of string elements 2 for inference input 'text_input' for model 'word_stream', "
            "expecting 1",
        ),
    ],
)
def test_generate_counts_nested_strings_against_the_shape_as_triton(
    server: ServerProcess, text_input: list[list[str]], error: str
) -> None:
    response = httpx.post(_url(server, "word_stream", "generate"), json={"text_input": text_input, "id": "g2"})
    assert (response.status_code, response.json()) == (400, {"error": f"[request id: g2] {error}"})


def test_generate_stream_sends_one_event_per_response(server: ServerProcess) -> None:
    with httpx.stream("POST", _url(server, "word_stream", "generate_stream"), json={"text_input": "a b c"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: ") :]) for line in response.iter_lines() if line]
    assert [event["text_output"] for event in events] == ["a", "b", "c"]


def test_generate_stream_of_unknown_model_is_a_plain_error(server: ServerProcess) -> None:
    response = httpx.post(_url(server, "nope", "generate_stream"), json={"x": 1})
    assert response.status_code == 404
    assert response.json() == {"error": "Request for unknown model: 'nope' is not found"}


def test_compressed_generate_is_refused(server: ServerProcess) -> None:
    response = httpx.post(
        _url(server, "add_sub", "generate"), content=b"\x1f\x8b", headers={"Content-Encoding": "gzip"}
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Unsupported content-encoding, only 'identity' is supported."}


def test_decoupled_model_on_infer_is_refused(server: ServerProcess) -> None:
    body = {"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}
    response = httpx.post(_url(server, "word_stream", "infer"), json=body)
    assert response.status_code == 501
    assert response.json() == {"error": "HTTP end point doesn't support models with decoupled transaction policy"}


def test_closing_a_stream_stops_the_model(server: ServerProcess, model_repository: ModelRepositoryBuilder) -> None:
    with httpx.stream("POST", _url(server, "ticker", "generate_stream"), json={"START": 1}) as response:
        lines = response.iter_lines()
        received = [line for line in (next(lines) for _ in range(6)) if line]
    assert len(received) == 3
    report = model_repository.root / "ticker" / "report.txt"
    deadline = time.monotonic() + 10
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sent, cancelled = report.read_text().split()
    assert cancelled == "True"
    assert int(sent) < 100


def _infer_body(request_id: str) -> bytes:
    return json.dumps(
        {"id": request_id, "inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]}]}
    ).encode()


def test_queued_request_is_dropped_when_its_client_disconnects(
    server: ServerProcess, model_repository: ModelRepositoryBuilder
) -> None:
    first = threading.Thread(
        target=lambda: httpx.post(_url(server, "slow_recorder", "infer"), content=_infer_body("first"), timeout=30)
    )
    first.start()
    time.sleep(0.3)  # "first" is executing; the next request waits in the queue
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=0.3)
    connection.request("POST", "/v2/models/slow_recorder/infer", body=_infer_body("abandoned"))
    with pytest.raises(socket.timeout):
        connection.getresponse()
    connection.close()
    first.join(10)
    time.sleep(1.5)  # long enough for the instance to have run "abandoned" had it been kept
    executed = (model_repository.root / "slow_recorder" / "executed.txt").read_text().split()
    assert executed == ["first"]
