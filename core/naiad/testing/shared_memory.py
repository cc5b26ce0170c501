"""Run a request through system (or CUDA) shared memory with tritonclient's helpers, as a client on the host would.

A backend's test suite checks that its models read inputs from, and write outputs into, client
regions (read-only input views, outputs written after the model ran)::

    from naiad.testing import infer_through_shared_memory

    outputs = infer_through_shared_memory(server.grpc_url, "grpc", "my_model", {"INPUT0": array})
    np.testing.assert_array_equal(outputs["OUTPUT0"], expected)

Needs ``tritonclient[http,grpc]``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

_regions = itertools.count()


def infer_through_shared_memory(
    url: str,
    protocol: str,
    model: str,
    inputs: Mapping[str, npt.NDArray[Any]],
    outputs: Sequence[str] = (),
    *,
    output_capacity: int = 1 << 20,
    cuda_device: int | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """Infer with every input in one region and every output (all of the model's if ``outputs`` is
    empty) written into another, each output given ``output_capacity`` bytes; returns the outputs read
    back from the region. ``protocol`` is ``"http"`` or ``"grpc"``. The regions are system shared memory,
    or CUDA shared memory on ``cuda_device``; both are unregistered and destroyed before returning."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(url)
    regions = _Regions(client, cuda_device)
    prefix = f"naiad_testing_{os.getpid()}_{next(_regions)}"
    arrays = {
        name: serialize_byte_tensor(array) if array.dtype == np.object_ else np.ascontiguousarray(array)
        for name, array in inputs.items()
    }
    sizes = {name: len(array.item()) if array.dtype == np.object_ else array.nbytes for name, array in arrays.items()}
    if not outputs:
        metadata = client.get_model_metadata(model)
        outputs = [entry["name"] if protocol == "http" else entry.name for entry in _outputs_of(metadata, protocol)]
    in_size, out_size = max(sum(sizes.values()), 1), output_capacity * len(outputs)
    try:
        regions.create(f"{prefix}_in", in_size, list(arrays.values()))
        regions.create(f"{prefix}_out", out_size)
        request_inputs, offset = [], 0
        for name, array in inputs.items():
            tensor = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_shared_memory(f"{prefix}_in", sizes[name], offset=offset)
            request_inputs.append(tensor)
            offset += sizes[name]
        requested = []
        for index, name in enumerate(outputs):
            output = module.InferRequestedOutput(name)
            output.set_shared_memory(f"{prefix}_out", output_capacity, offset=index * output_capacity)
            requested.append(output)
        result = client.infer(model, request_inputs, outputs=requested)
        written = regions.contents(f"{prefix}_out", out_size)
        read: dict[str, npt.NDArray[Any]] = {}
        for index, name in enumerate(outputs):
            entry = result.get_output(name)
            if protocol == "http":
                datatype, shape = entry["datatype"], entry["shape"]
            else:
                datatype, shape = entry.datatype, entry.shape
            window = written[index * output_capacity : (index + 1) * output_capacity]
            read[name] = _array(window, datatype, [int(dim) for dim in shape])
        return read
    finally:
        regions.close()
        client.close()


def _array(window: npt.NDArray[np.uint8], datatype: str, shape: list[int]) -> npt.NDArray[Any]:
    """An output of ``datatype`` and ``shape`` from the start of its window's bytes."""
    from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

    count = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        return np.asarray(deserialize_bytes_tensor(window.tobytes())[:count]).reshape(shape)
    dtype = np.dtype(triton_to_np_dtype(datatype))
    return np.frombuffer(window.tobytes()[: count * dtype.itemsize], dtype).reshape(shape)


class _Regions:
    """Regions made, registered and destroyed with tritonclient's helpers: system shared memory, or
    CUDA shared memory on ``device`` (which needs cuda-python)."""

    def __init__(self, client: Any, device: int | None) -> None:
        if device is None:
            import tritonclient.utils.shared_memory as helpers
        else:
            import tritonclient.utils.cuda_shared_memory as helpers
        self._helpers: Any = helpers
        self._client = client
        self._device = device
        self._handles: dict[str, Any] = {}

    def create(self, name: str, size: int, arrays: Sequence[npt.NDArray[Any]] = ()) -> None:
        if self._device is None:
            handle = self._helpers.create_shared_memory_region(name, f"/{name}", size)
        else:
            handle = self._helpers.create_shared_memory_region(name, size, self._device)
        self._handles[name] = handle
        if arrays:
            self._helpers.set_shared_memory_region(handle, list(arrays))
        if self._device is None:
            self._client.register_system_shared_memory(name, f"/{name}", size)
        else:
            raw_handle = self._helpers.get_raw_handle(handle)
            self._client.register_cuda_shared_memory(name, raw_handle, self._device, size)

    def contents(self, name: str, size: int) -> npt.NDArray[np.uint8]:
        return np.array(self._helpers.get_contents_as_numpy(self._handles[name], np.uint8, [size]))

    def close(self) -> None:
        for name, handle in self._handles.items():
            if self._device is None:
                self._client.unregister_system_shared_memory(name)
            else:
                self._client.unregister_cuda_shared_memory(name)
            self._helpers.destroy_shared_memory_region(handle)


def _outputs_of(metadata: Any, protocol: str) -> list[Any]:
    return list(metadata["outputs"] if protocol == "http" else metadata.outputs)
