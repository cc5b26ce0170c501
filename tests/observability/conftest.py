"""Models whose statistics the observability tests drive, and a server over them."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ADD_SUB = (
    Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "add_sub" / "1" / "model.py"
).read_text()

ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}
"""

RAISES = """
class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("cannot handle this input")
"""

# Echoes INPUT0 after the "sleep" parameter (seconds, default 1); answers CANCELLED once it sees
# its request cancelled.
SLOW = """
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            deadline = time.monotonic() + float(json.loads(request.parameters()).get("sleep", 1))
            while time.monotonic() < deadline and not request.is_cancelled():
                time.sleep(0.005)
            if request.is_cancelled():
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)))
            else:
                data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)]))
        return responses
"""

SLOW_CONFIG = """
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}
"""

# Decoupled: N = IN[0] responses (OUT = i), 10 ms apart, then a flag-only final; logs its request id.
STREAM = """
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            pb_utils.Logger.log_info("streaming for request " + request.request_id())
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()
        return None

    def _answer(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
        for index in range(count):
            time.sleep(0.01)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([index], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

STREAM_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

FAILING_PIPELINE_CONFIG = """
platform: "ensemble"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [ {
  model_name: "raises_in_pipeline" model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" }
} ] }
"""


def build_repository(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    for name in ("counted", "untouched", "perf"):
        builder.add_python_model(name, ADD_SUB, ADD_SUB_CONFIG.format(max_batch_size=0, extra=""))
    builder.add_python_model(
        "batched",
        ADD_SUB,
        ADD_SUB_CONFIG.format(max_batch_size=8, extra="dynamic_batching { max_queue_delay_microseconds: 100000 }"),
    )
    builder.add_python_model(
        "perf_batched",
        ADD_SUB,
        ADD_SUB_CONFIG.format(max_batch_size=8, extra="dynamic_batching { max_queue_delay_microseconds: 2000 }"),
    )
    builder.add_python_model("raises", RAISES, SLOW_CONFIG.format(max_batch_size=0, extra=""))
    builder.add_python_model("raises_in_pipeline", RAISES, SLOW_CONFIG.format(max_batch_size=0, extra=""))
    builder.add_model("failing_pipeline", FAILING_PIPELINE_CONFIG, {"1/.keep": ""})
    builder.add_python_model(
        "slow_full",
        SLOW,
        SLOW_CONFIG.format(max_batch_size=1, extra="dynamic_batching { default_queue_policy { max_queue_size: 1 } }"),
    )
    builder.add_python_model(
        "slow_timeout",
        SLOW,
        SLOW_CONFIG.format(
            max_batch_size=1,
            extra="dynamic_batching { default_queue_policy { timeout_action: REJECT "
            "default_timeout_microseconds: 100000 } }",
        ),
    )
    builder.add_python_model("slow_cancel", SLOW, SLOW_CONFIG.format(max_batch_size=0, extra=""))
    builder.add_python_model("stream", STREAM, STREAM_CONFIG)
    builder.add_python_model("perf_stream", STREAM, STREAM_CONFIG)
    return root


@pytest.fixture(scope="session")
def observability_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("observability") / "models")


@pytest.fixture(scope="session")
def server(observability_repository: Path) -> Iterator[ServerProcess]:
    """One server with the default metrics settings (tests use models of their own or deltas)."""
    process = start_server([observability_repository])
    yield process
    process.stop()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def metrics_text(server: ServerProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def model_stats(server: ServerProcess, model: str) -> dict[str, Any]:
    stats: dict[str, Any] = get_json(f"http://{server.http_url}/v2/models/{model}/stats")["model_stats"][0]
    return stats


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    """Statistics are counted once an execution returns, a moment after the client has its answer."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.02)
