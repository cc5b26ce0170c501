"""One naiad server for the shared-memory tests, and regions made with tritonclient's own helpers."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ADD_SUB = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", a + b)
            out1 = pb_utils.Tensor("OUTPUT1", a - b)
            a += 100  # a model may write to its inputs; the client's region must not change
            responses.append(pb_utils.InferenceResponse([out0, out1]))
        return responses
"""

ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { }
"""

# Waits for a file to appear before answering: a test holds a request in flight while it unregisters.
SLOW_ECHO = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            gate = pb_utils.get_input_tensor_by_name(request, "GATE").as_numpy()[0].decode()
            deadline = time.monotonic() + 30
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.01)
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data * 2)]))
        return responses
"""

SLOW_ECHO_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "GATE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

STRINGS = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()[:, ::-1])]
            )
            for r in requests
        ]
"""

STRINGS_CONFIG = """
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 2 ] } ]
"""

# A decoupled model answering each request with COUNT responses of its input plus the response's index.
REPEAT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            for index in range(count):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data + np.float32(index))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

REPEAT_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

_names = itertools.count()


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("shared_memory") / "models")
    repository.add_python_model("add_sub", ADD_SUB, ADD_SUB_CONFIG)
    repository.add_python_model("slow_echo", SLOW_ECHO, SLOW_ECHO_CONFIG)
    repository.add_python_model("strings", STRINGS, STRINGS_CONFIG)
    repository.add_python_model("repeat", REPEAT, REPEAT_CONFIG)
    running = start_server([repository.root])
    yield running
    running.stop()


Region = Callable[[int], tuple[str, str, shm.SharedMemoryRegion]]


@pytest.fixture
def region() -> Iterator[Region]:
    """Make POSIX shared-memory objects: ``region(byte_size)`` -> (region name, key, handle); all
    are destroyed at teardown."""
    made: list[shm.SharedMemoryRegion] = []

    def make(byte_size: int) -> tuple[str, str, shm.SharedMemoryRegion]:
        number = next(_names)
        name, key = f"region{number}", f"/naiad_test_{os.getpid()}_{number}"
        handle = shm.create_shared_memory_region(name, key, byte_size)
        made.append(handle)
        return name, key, handle

    yield make
    for handle in made:
        shm.destroy_shared_memory_region(handle)


Registered = Callable[..., tuple[str, str, shm.SharedMemoryRegion]]


@pytest.fixture
def registered(server: ServerProcess, region: Region) -> Iterator[Registered]:
    """``registered(byte_size, *arrays)``: a region holding ``arrays``, registered whole over HTTP."""
    client = httpclient.InferenceServerClient(server.http_url)

    def make(byte_size: int, *arrays: np.ndarray) -> tuple[str, str, shm.SharedMemoryRegion]:
        name, key, handle = region(byte_size)
        if arrays:
            shm.set_shared_memory_region(handle, list(arrays))
        client.register_system_shared_memory(name, key, byte_size)
        return name, key, handle

    yield make
    client.close()


@pytest.fixture(autouse=True)
def _forget_regions(server: ServerProcess) -> Iterator[None]:
    """Each test starts and ends with no region registered."""
    yield
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        client.unregister_system_shared_memory()
    finally:
        client.close()
