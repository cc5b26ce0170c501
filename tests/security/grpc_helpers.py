"""Models, raw gRPC calls and process readings for the gRPC hardening tests.

The tests speak gRPC with grpcio stubs where tritonclient would hide what they look at (streams
nobody reads, cancelled calls, raw metadata), and read the server's memory, threads and open
descriptors from ``/proc/<pid>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.testing import ModelRepositoryBuilder

MIB = 1024 * 1024

# COUNT: the number of elements of INPUT0 (any size, UINT8): a model whose answer is tiny.
COUNT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(
                "OUTPUT0", np.array([pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy().size], dtype=np.int64)
            )])
            for r in requests
        ]
"""
COUNT_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""

# FILL: OUT is KIB KiB of the byte 7 (PAD is ignored: it makes requests as large as a test wants).
FILL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(
                "OUT", np.full(int(pb_utils.get_input_tensor_by_name(r, "KIB").as_numpy()[0]) * 1024, 7, np.uint8)
            )])
            for r in requests
        ]
"""
FILL_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "KIB" data_type: TYPE_INT32 dims: [ 1 ] },
        { name: "PAD" data_type: TYPE_UINT8 dims: [ -1 ] optional: true } ]
output [ { name: "OUT" data_type: TYPE_UINT8 dims: [ -1 ] } ]
"""

# TICKS (decoupled): COUNT responses OUT = i, DELAY seconds apart, from a thread, until cancelled.
TICKS = """
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._run, args=(request,), daemon=True).start()

    def _run(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
        delay = float(pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()[0])
        for index in range(count):
            if sender.is_cancelled():
                break
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([index], np.int32))]))
            time.sleep(delay)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""
TICKS_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] },
        { name: "DELAY" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

# SLOW: answers INPUT0's size after "sleep" seconds (a parameter), or CANCELLED once cancelled.
SLOW = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            deadline = time.monotonic() + float(json.loads(request.parameters()).get("sleep", 10))
            while time.monotonic() < deadline and not request.is_cancelled():
                time.sleep(0.01)
            size = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().size
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([size], np.int64))]))
        return responses
"""

ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b)]))
        return responses
"""
ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def build_repository(root: Path) -> Path:
    """count, fill, ticks (decoupled), slow_count and add_sub."""
    builder = ModelRepositoryBuilder(root)
    builder.add_python_model("count", COUNT, COUNT_CONFIG)
    builder.add_python_model("fill", FILL, FILL_CONFIG)
    builder.add_python_model("ticks", TICKS, TICKS_CONFIG)
    builder.add_python_model("slow_count", SLOW, COUNT_CONFIG)
    builder.add_python_model("add_sub", ADD_SUB, ADD_SUB_CONFIG)
    return root


# -- requests --------------------------------------------------------------------------------------


def count_request(
    size: int, datatype: str = "UINT8", model: str = "count", request_id: str = "", sleep: float | None = None
) -> bytes:
    """A serialized ModelInferRequest with one ``size``-byte input (built without copying it twice);
    ``sleep`` is slow_count's parameter."""
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    if sleep is not None:
        request.parameters["sleep"].double_param = sleep
    request.inputs.add(name="INPUT0", datatype=datatype, shape=[size])
    return _with_raw(request, [np.ones(size, dtype=np.uint8).data])


def fill_request(kib: int, pad: int = 0, request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="fill", id=request_id)
    request.inputs.add(name="KIB", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([kib], np.int32).tobytes())
    if pad:
        request.inputs.add(name="PAD", datatype="UINT8", shape=[pad])
        request.raw_input_contents.append(bytes(pad))
    return request


def ticks_request(count: int, delay: float, request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="ticks", id=request_id)
    request.inputs.add(name="COUNT", datatype="INT32", shape=[1])
    request.inputs.add(name="DELAY", datatype="FP32", shape=[1])
    request.raw_input_contents.extend([np.array([count], np.int32).tobytes(), np.array([delay], np.float32).tobytes()])
    return request


def add_sub_request(value: float = 1.0, request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", id=request_id)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[4])
        request.raw_input_contents.append(np.full(4, value, np.float32).tobytes())
    return request


def _with_raw(request: service_pb2.ModelInferRequest, raw: list[memoryview]) -> bytes:
    """``request`` serialized with ``raw`` as its raw_input_contents (field 7), appended by hand."""
    pieces: list[bytes | memoryview] = [request.SerializeToString()]
    for chunk in raw:
        pieces.append(b"\x3a" + _varint(len(chunk)))
        pieces.append(chunk)
    return b"".join(pieces)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# -- calls -----------------------------------------------------------------------------------------


def channel(url: str) -> grpc.Channel:
    """A channel without message size limits of its own."""
    return grpc.insecure_channel(
        url, options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    )


def stub(url: str) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(channel(url))


def raw_infer(target: grpc.Channel, data: bytes, **kwargs: object) -> service_pb2.ModelInferResponse:
    """ModelInfer with an already serialized request."""
    call = target.unary_unary(
        "/inference.GRPCInferenceService/ModelInfer",
        request_serializer=None,
        response_deserializer=service_pb2.ModelInferResponse.FromString,
    )
    return call(data, **kwargs)  # type: ignore[no-any-return]


def raw_stream(target: grpc.Channel, messages: Iterable[bytes], **kwargs: object) -> Any:
    """ModelStreamInfer with already serialized requests; iterate the call for the responses."""
    call = target.stream_stream(
        "/inference.GRPCInferenceService/ModelStreamInfer",
        request_serializer=None,
        response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
    )
    return call(iter(messages), **kwargs)


def rpc_error(call: Callable[[], object]) -> grpc.RpcError:
    """The RpcError ``call`` ends with (it must end with one)."""
    try:
        call()
    except grpc.RpcError as error:
        return error
    raise AssertionError("the call succeeded")


# -- the server process ----------------------------------------------------------------------------


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/<pid>/status: VmRSS and VmHWM in KiB, Threads as a count."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    raise KeyError(key)


def rss_mib(pid: int) -> float:
    return proc_status(pid, "VmRSS") / 1024


def open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def settles_below(reading: Callable[[], float], limit: float, timeout: float = 5.0) -> float:
    """Poll ``reading`` until it is at most ``limit`` (or ``timeout`` passes); its last value."""
    deadline = time.monotonic() + timeout
    value = reading()
    while value > limit and time.monotonic() < deadline:
        time.sleep(0.1)
        value = reading()
    return value
