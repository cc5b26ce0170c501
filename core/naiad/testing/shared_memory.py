"""Run a request through system shared memory with tritonclient's helpers, as a client on the host would.

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
) -> dict[str, npt.NDArray[Any]]:
    """Infer with every input in one region and every output (all of the model's if ``outputs`` is
    empty) written into another, each output given ``output_capacity`` bytes; returns the outputs read
    back from the region. ``protocol`` is ``"http"`` or ``"grpc"``. Both regions are unregistered and
    destroyed before returning."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor, triton_to_np_dtype

    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(url)
    prefix = f"naiad_testing_{os.getpid()}_{next(_regions)}"
    arrays = {
        name: serialize_byte_tensor(array) if array.dtype == np.object_ else np.ascontiguousarray(array)
        for name, array in inputs.items()
    }
    sizes = {name: len(array.item()) if array.dtype == np.object_ else array.nbytes for name, array in arrays.items()}
    if not outputs:
        metadata = client.get_model_metadata(model)
        outputs = [entry["name"] if protocol == "http" else entry.name for entry in _outputs_of(metadata, protocol)]
    in_handle = shm.create_shared_memory_region(f"{prefix}_in", f"/{prefix}_in", max(sum(sizes.values()), 1))
    out_size = output_capacity * len(outputs)
    out_handle = shm.create_shared_memory_region(f"{prefix}_out", f"/{prefix}_out", out_size)
    try:
        shm.set_shared_memory_region(in_handle, list(arrays.values()))
        client.register_system_shared_memory(f"{prefix}_in", f"/{prefix}_in", max(sum(sizes.values()), 1))
        client.register_system_shared_memory(f"{prefix}_out", f"/{prefix}_out", out_size)
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
        read: dict[str, npt.NDArray[Any]] = {}
        for index, name in enumerate(outputs):
            entry = result.get_output(name)
            datatype, shape = (
                (entry["datatype"], entry["shape"]) if protocol == "http" else (entry.datatype, entry.shape)
            )
            read[name] = shm.get_contents_as_numpy(
                out_handle, triton_to_np_dtype(datatype), list(shape), offset=index * output_capacity
            ).copy()
        return read
    finally:
        client.unregister_system_shared_memory(f"{prefix}_in")
        client.unregister_system_shared_memory(f"{prefix}_out")
        client.close()
        shm.destroy_shared_memory_region(in_handle)
        shm.destroy_shared_memory_region(out_handle)


def _outputs_of(metadata: Any, protocol: str) -> list[Any]:
    return list(metadata["outputs"] if protocol == "http" else metadata.outputs)
