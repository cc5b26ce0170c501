"""Python models only the gRPC tests use: decoupled ones, a slow one that notices cancellation."""

from __future__ import annotations

from pathlib import Path

from naiad.testing import ModelRepositoryBuilder

# Sends N responses (OUT = i, IDX = N for i in 0 .. N-1) for input IN = [N], from a thread,
# DELAY seconds apart, then a flag-only final; N < 0 sends an error response and the final flag.
# If it sees the request cancelled it creates the file named by the string parameter "marker".
REPEAT = """
import json
import pathlib
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()
        return None

    def _answer(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
        delay = float(pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()[0]) \\
            if pb_utils.get_input_tensor_by_name(request, "DELAY") is not None else 0.0
        if count < 0:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative count " + str(count))))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        marker = json.loads(request.parameters()).get("marker", "")
        for index in range(count):
            time.sleep(delay)
            if sender.is_cancelled():
                if marker:
                    pathlib.Path(marker).write_text("cancelled")
                break
            sender.send(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([index], dtype=np.int32)),
                pb_utils.Tensor("IDX", np.array([count], dtype=np.int32)),
            ]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

REPEAT_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] },
        { name: "DELAY" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "IDX" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# Echoes INPUT0 after "sleep" seconds (a float parameter, default 10); when it sees the request
# cancelled first it creates the file named by the string parameter "marker" and answers with
# a CANCELLED error.
SLOW = """
import json
import pathlib
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters())
            marker = parameters.get("marker", "")
            deadline = time.monotonic() + float(parameters.get("sleep", 10))
            while time.monotonic() < deadline and not request.is_cancelled():
                time.sleep(0.01)
            if request.is_cancelled():
                if marker:
                    pathlib.Path(marker).write_text("cancelled")
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)))
            else:
                data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)]))
        return responses
"""

SLOW_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def add_grpc_models(root: Path) -> Path:
    """Add the decoupled and slow models to the repository at ``root``."""
    builder = ModelRepositoryBuilder(root)
    builder.add_python_model("repeat_int32", REPEAT, REPEAT_CONFIG)
    builder.add_python_model("slow_identity", SLOW, SLOW_CONFIG)
    return root
