"""A call that is cancelled or passes its deadline cancels the requests it started."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess


def _wait_for(path: Path, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def _slow_input() -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, dtype=np.float32))
    return [tensor]


def test_unary_deadline_cancels_the_request(grpc_server: ServerProcess, tmp_path: Path) -> None:
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    client.update_log_settings({"log_verbose_level": 1})
    marker = tmp_path / "unary"
    try:
        with pytest.raises(InferenceServerException) as caught:
            client.infer(
                "slow_identity", _slow_input(), parameters={"marker": str(marker)}, client_timeout=0.5, request_id="r7"
            )
    finally:
        client.update_log_settings({"log_verbose_level": 0})
    assert caught.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    assert _wait_for(marker), "the model never saw its request cancelled"
    # in the verbose log, beginning with Triton's words
    assert "Cancellation notification received for request 'r7' of model 'slow_identity'" in grpc_server.logs()


def test_cancelling_a_stream_cancels_its_requests(grpc_server: ServerProcess, tmp_path: Path) -> None:
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    answers: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put(result or error))
    decoupled, plain = tmp_path / "decoupled", tmp_path / "plain"
    count = grpcclient.InferInput("IN", [1], "INT32")
    count.set_data_from_numpy(np.array([1000], dtype=np.int32))
    delay = grpcclient.InferInput("DELAY", [1], "FP32")
    delay.set_data_from_numpy(np.array([0.02], dtype=np.float32))
    client.async_stream_infer("repeat_int32", [count, delay], parameters={"marker": str(decoupled)})
    client.async_stream_infer("slow_identity", _slow_input(), parameters={"marker": str(plain)})
    answers.get(timeout=30)  # the decoupled model is sending
    client.stop_stream(cancel_requests=True)
    assert _wait_for(decoupled), "the decoupled model never saw its request cancelled"
    assert _wait_for(plain), "the slow model never saw its request cancelled"
    client.close()
