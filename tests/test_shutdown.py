"""SIGTERM: readiness goes 503, accepted requests finish, models are finalized, exit code 0."""

from __future__ import annotations

import contextlib
import http.client
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

SLOW = """
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.marker = Path(args["model_repository"]) / "finalized"

    def execute(self, requests):
        time.sleep(1.5)
        outputs = [pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy() * 2) for r in requests]
        return [pb_utils.InferenceResponse([output]) for output in outputs]

    def finalize(self):
        self.marker.write_text("yes")
"""

CONFIG = """
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def _status(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


def test_sigterm_drains_in_flight_requests(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_dir: Path = model_repository.add_python_model("slow", SLOW, CONFIG)
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([21], dtype=np.float32))
    results: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: results.append(client.infer("slow", [tensor]).as_numpy("OUTPUT0")))
    worker.start()
    time.sleep(0.5)  # the request is executing now
    server.process.terminate()
    deadline = time.monotonic() + 5
    statuses = set()
    while time.monotonic() < deadline and worker.is_alive():
        try:
            # readiness turns 503 while the drain runs; liveness stays 200, as Triton's
            statuses.add((_status(server.http_port, "/v2/health/ready"), _status(server.http_port, "/v2/health/live")))
        except OSError:
            break
        time.sleep(0.05)
    worker.join(10)
    assert server.process.wait(30) == 0
    np.testing.assert_array_equal(results[0], [42])
    assert (503, 200) in statuses
    assert "SIGTERM received" in server.logs()
    assert (model_dir / "finalized").read_text() == "yes"


STUCK = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(25)  # longer than the exit timeout and the watchdog's grace together
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
"""


def test_past_the_exit_timeout_the_server_stops_without_its_requests_and_exits_1(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """As Triton: a request still running when --exit-timeout-secs passes does not hold the server;
    an execute that never returns is left behind by the watchdog, with a log line for each step."""
    model_repository.add_python_model("stuck", STUCK, CONFIG)
    server = naiad_server(model_repository.root, args=("--exit-timeout-secs=1",))
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.float32))
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(client.infer("stuck", [tensor]))
        except Exception as error:  # the connection closes under it
            outcome.append(error)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    time.sleep(1.0)  # the request is executing now
    stopped = time.monotonic()
    server.process.terminate()
    assert server.process.wait(60) == 1
    assert time.monotonic() - stopped < 22  # 1 s of exit timeout, then at most 15 s of watchdog grace and some
    logs = server.logs()
    assert "exit timeout expired: 1 request(s) still in flight 1 s after the stop signal" in logs
    assert "naiad is still stopping 15 s after the exit timeout passed" in logs
    worker.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], Exception)


def test_a_stream_opened_while_the_server_drains_is_refused_at_once(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """As a unary call is: UNAVAILABLE at once, so the call neither hangs nor holds the shutdown."""
    model_repository.add_python_model("slow", SLOW, CONFIG)
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.float32))
    worker = threading.Thread(target=lambda: client.infer("slow", [tensor]), daemon=True)
    worker.start()
    time.sleep(0.5)  # the request is executing now
    signalled = time.monotonic()
    server.process.terminate()
    deadline = time.monotonic() + 5
    while _status(server.http_port, "/v2/health/ready") != 503 and time.monotonic() < deadline:
        time.sleep(0.02)
    errors: queue.Queue[object] = queue.Queue()
    stream = grpcclient.InferenceServerClient(server.grpc_url)
    stream.start_stream(callback=lambda result, error: errors.put(error or result))
    late = grpcclient.InferInput("INPUT0", [1], "FP32")
    late.set_data_from_numpy(np.array([2], dtype=np.float32))
    with contextlib.suppress(InferenceServerException):  # refused on opening, before this send
        stream.async_stream_infer("slow", [late])
    refusal = errors.get(timeout=5)
    assert isinstance(refusal, InferenceServerException)
    assert refusal.status() == "StatusCode.UNAVAILABLE"
    assert refusal.message() == "Server not ready: it is shutting down"
    assert server.process.wait(30) == 0
    assert time.monotonic() - signalled < 4.5  # the slow request's 1 s more, no 5 s stream grace
    stream.stop_stream()
    stream.close()
    worker.join(10)
