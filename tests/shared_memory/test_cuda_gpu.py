"""CUDA shared memory on a GPU, with tritonclient's own CUDA helpers (``device_checks/cuda_shared_memory.sh``).

Skipped where no CUDA device is present: ``test_regions.py`` covers that case. With a device, the
server needs ``naiad[cuda]`` (cuda-bindings) and these tests fail without it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import gpu_count
from naiad.testing import ServerProcess

pytestmark = pytest.mark.skipif(gpu_count() == 0, reason="needs a CUDA device (and naiad[cuda] installed)")

A = np.arange(16, dtype=np.float32).reshape(1, 16)
B = np.full((1, 16), 3, dtype=np.float32)


@pytest.fixture
def cuda_shm() -> Iterator[object]:
    import tritonclient.utils.cuda_shared_memory as cudashm

    made: list[object] = []

    def make(name: str, byte_size: int) -> object:
        handle = cudashm.create_shared_memory_region(name, byte_size, 0)
        made.append(handle)
        return handle

    yield make
    for handle in made:
        cudashm.destroy_shared_memory_region(handle)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_through_cuda_shared_memory(server: ServerProcess, cuda_shm: object, protocol: str) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    assert callable(cuda_shm)
    inputs, outputs = cuda_shm(f"in_{protocol}", 128), cuda_shm(f"out_{protocol}", 128)
    try:
        metadata = client.get_server_metadata()
        extensions = metadata["extensions"] if protocol == "http" else metadata.extensions
        assert "cuda_shared_memory" in extensions
        cudashm.set_shared_memory_region(inputs, [A, B])
        client.register_cuda_shared_memory(f"in_{protocol}", cudashm.get_raw_handle(inputs), 0, 128)
        client.register_cuda_shared_memory(f"out_{protocol}", cudashm.get_raw_handle(outputs), 0, 128)
        first, second = module.InferInput("INPUT0", [1, 16], "FP32"), module.InferInput("INPUT1", [1, 16], "FP32")
        first.set_shared_memory(f"in_{protocol}", 64)
        second.set_shared_memory(f"in_{protocol}", 64, offset=64)
        out0, out1 = module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")
        out0.set_shared_memory(f"out_{protocol}", 64)
        out1.set_shared_memory(f"out_{protocol}", 64, offset=64)
        client.infer("add_sub", [first, second], outputs=[out0, out1])
        written = cudashm.get_contents_as_numpy(outputs, np.float32, [2, 16])
        np.testing.assert_array_equal(written, np.concatenate([A + B, A - B]))
        status = client.get_cuda_shared_memory_status(f"out_{protocol}")
        assert status  # reported with its device and size
        too_big = module.InferRequestedOutput("OUTPUT0")
        too_big.set_shared_memory(f"out_{protocol}", 64, offset=100)
        with pytest.raises(Exception, match="Invalid offset \\+ byte size"):
            client.infer("add_sub", [first, second], outputs=[too_big])
    finally:
        client.unregister_cuda_shared_memory()
        client.close()
