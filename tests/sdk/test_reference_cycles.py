"""A finished request is freed by reference counting alone: nothing of it waits for the cyclic GC.

The real server runs in this process with the cyclic collector off; after requests over HTTP, gRPC,
in-process submission and an ensemble, a collection that keeps what it finds (``DEBUG_SAVEALL``) must
find none of the request path's objects: requests, senders, sinks, tensors, responses, input arrays, body buffers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import BlockingSink, Tensor
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

from .backends import IDENTITY_CONFIG

REQUEST_PATH_MODULES = ("naiad.",)
ECHO_TWICE = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "echo" input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "once" } },
  { model_name: "echo" input_map { key: "INPUT0" value: "once" } output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
"""
REQUEST_PATH_TYPES = (np.ndarray, bytearray, memoryview)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("cycles") / "models")
    repository.add_model("echo", IDENTITY_CONFIG.format(extra=""), {"1/.keep": ""})
    repository.add_model("echo_twice", ECHO_TWICE, {"1/.keep": ""})
    with serve_in_thread([repository.root]) as server:
        yield server


def _leftovers() -> list[str]:
    """What the cyclic collector finds that belongs to the request path."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [
            f"{type(item).__module__}.{type(item).__qualname__}"
            for item in gc.garbage
            if type(item).__module__.startswith(REQUEST_PATH_MODULES) or isinstance(item, REQUEST_PATH_TYPES)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return sorted(set(found))


def test_no_request_leaves_a_reference_cycle(served: ThreadedServer) -> None:
    http = httpclient.InferenceServerClient(served.http_url)
    grpc = grpcclient.InferenceServerClient(served.grpc_url)
    data = np.arange(8, dtype=np.float32).reshape(1, 8)
    http_input = httpclient.InferInput("INPUT0", [1, 8], "FP32")
    http_input.set_data_from_numpy(data)
    grpc_input = grpcclient.InferInput("INPUT0", [1, 8], "FP32")
    grpc_input.set_data_from_numpy(data)
    for _ in range(3):  # warm up: first-use caches are not per request
        http.infer("echo", [http_input])
        grpc.infer("echo", [grpc_input])
        served.handle.infer("echo", [Tensor("INPUT0", "FP32", data)])
        served.handle.infer("echo_twice", [Tensor("INPUT0", "FP32", data)])
    gc.collect()
    gc.disable()
    try:
        _leftovers()  # start from nothing
        for _ in range(20):
            np.testing.assert_array_equal(http.infer("echo", [http_input]).as_numpy("OUTPUT0"), data)
            np.testing.assert_array_equal(grpc.infer("echo", [grpc_input]).as_numpy("OUTPUT0"), data)
            sink = BlockingSink()
            served.handle.submit("echo", [Tensor("INPUT0", "FP32", data.copy())], sink)
            assert sink.response(10).outputs[0].numpy().tolist() == data.tolist()
            ensemble = served.handle.infer("echo_twice", [Tensor("INPUT0", "FP32", data.copy())])
            assert ensemble.outputs[0].numpy().tolist() == data.tolist()
        assert _leftovers() == []
    finally:
        gc.enable()
