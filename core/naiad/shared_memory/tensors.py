"""Tensors read from shared-memory windows, and the output destinations that write into them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from naiad import datatypes
from naiad.errors import NaiadError
from naiad.inference import ParameterValue
from naiad.shared_memory.registry import Window
from naiad.tensor import MemoryKind, Tensor
from naiad.wire import element_count, from_bytes, wire_array


def input_tensor(
    window: Window, name: str, datatype: datatypes.DataType, shape: list[int], model_name: str, request_id: str
) -> Tensor:
    """An input over a window, without a copy: a read-only numpy view of system shared memory, or a
    device tensor over CUDA shared memory (copied to the host only when no GPU framework is installed)."""
    if window.memory is not None:
        return Tensor(name, datatype.wire, from_bytes(window.memory, datatype, shape, name, model_name, request_id))
    device = window.device
    assert device is not None
    count = element_count(name, shape, datatype)
    if datatype.wire != "BYTES" and count * datatype.byte_size == device.byte_size:
        array = device.device_array(datatype.numpy.newbyteorder("<"), tuple(shape))
        if array is not None:
            return Tensor(name, datatype.wire, array, MemoryKind.GPU, device.region.device_id)
    return Tensor(name, datatype.wire, from_bytes(device.to_host(), datatype, shape, name, model_name, request_id))


class RegionDestination:
    """Writes a requested output into a shared-memory window (an :class:`~naiad.inference.OutputDestination`)."""

    __slots__ = ("_output", "_window")

    def __init__(self, window: Window, output: str) -> None:
        self._window = window
        self._output = output

    def write(self, tensor: Tensor) -> None:
        device = self._window.device
        if device is not None and tensor.memory is MemoryKind.GPU:
            interface: dict[str, Any] = tensor.__cuda_array_interface__
            if interface.get("strides") is None:
                byte_size = int(np.prod(interface["shape"])) * np.dtype(interface["typestr"]).itemsize
                self._check_fits(byte_size)
                device.write(None, int(interface["data"][0]), byte_size)
                return
        data = wire_array(tensor)
        self._check_fits(data.nbytes)
        if device is not None:
            device.write(data, None, data.nbytes)
        elif data.nbytes:
            assert self._window.memory is not None
            np.frombuffer(self._window.memory, np.uint8, data.nbytes)[:] = data

    def parameters(self) -> Mapping[str, ParameterValue]:
        return {}  # Triton's responses say nothing of an output written to shared memory

    def _check_fits(self, byte_size: int) -> None:
        if byte_size > self._window.byte_size:
            raise NaiadError(
                f"shared memory size specified with the request for output '{self._output}' "
                f"({self._window.byte_size} bytes) should be at least {byte_size} bytes to hold the results"
            )
