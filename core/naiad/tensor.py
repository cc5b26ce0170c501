"""Tensors that know where their data lives: host memory, pinned host memory or a GPU.

A :class:`Tensor` is a named array plus its Triton datatype (wire name, e.g. ``FP32``). A host
tensor holds a numpy array. A device tensor holds the framework's own array (a torch or CuPy
array, anything that speaks DLPack or ``__cuda_array_interface__``), so a GPU backend hands its
outputs over without a copy; :meth:`Tensor.numpy` always returns host data, copying device memory
only when it must. BYTES tensors are numpy object arrays of ``bytes``; BF16 tensors carry their raw
16-bit patterns as ``uint16`` on the host.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import ErrorCode, NaiadError


class MemoryKind(enum.Enum):
    """Where a tensor's data lives (Triton's ``TRITONSERVER_MemoryType``)."""

    HOST = "HOST"
    PINNED = "PINNED"  # page-locked host memory, reachable by a GPU's copy engines
    GPU = "GPU"


# DLPack device types (dlpack.h) -> memory kind.
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_DLPACK_MEMORY = {
    _KDL_CPU: MemoryKind.HOST,
    _KDL_CUDA: MemoryKind.GPU,
    _KDL_CUDA_HOST: MemoryKind.PINNED,
    _KDL_CUDA_MANAGED: MemoryKind.GPU,
}


@dataclass(slots=True)
class Tensor:
    """A named tensor: its data, its Triton datatype and where the data lives.

    ``data`` is a numpy array when ``memory`` is HOST; otherwise the device array the backend
    produced. Use :meth:`numpy` for host data whatever the memory kind, or hand the tensor to any
    DLPack consumer (``torch.from_dlpack(tensor)``, ``np.from_dlpack(tensor)``).
    """

    name: str
    datatype: str
    data: Any
    memory: MemoryKind = MemoryKind.HOST
    device_id: int = 0

    @classmethod
    def from_dlpack(cls, name: str, source: Any, datatype: str | None = None) -> Tensor:
        """Wrap any DLPack producer without copying; host data becomes a numpy view.

        ``datatype`` defaults to the source's element type; give it for BF16 and for device
        arrays that expose no ``__cuda_array_interface__``.
        """
        device_type, device_id = (int(part) for part in source.__dlpack_device__())
        memory = _DLPACK_MEMORY.get(device_type)
        if memory is None:
            raise NaiadError(
                f"tensor '{name}' lives on DLPack device type {device_type}, which naiad cannot serve; "
                "move it to host memory or a CUDA device first",
                ErrorCode.INVALID_ARG,
            )
        if memory is MemoryKind.HOST:
            array = np.from_dlpack(source)
            return cls(name, datatype or datatypes.from_numpy(array.dtype).wire, array)
        return cls(name, datatype or _device_datatype(name, source), source, memory, device_id)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)  # numpy, torch and CuPy shapes are sequences of ints

    def numpy(self) -> npt.NDArray[Any]:
        """The data as a host numpy array: the array itself for host tensors, else a copy."""
        if self.memory is MemoryKind.HOST:
            return self.data  # type: ignore[no-any-return]
        return _copy_to_host(self.data, self.datatype, self.name)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """Export the data to a DLPack consumer (zero copy)."""
        if stream is None:
            return self.data.__dlpack__(**kwargs)
        return self.data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self.data.__dlpack_device__()
        return device

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The device array's interface; absent (AttributeError) for host tensors."""
        if self.memory is not MemoryKind.GPU:
            raise AttributeError(f"tensor '{self.name}' is in {self.memory.value} memory, not on a GPU")
        interface: dict[str, Any] = self.data.__cuda_array_interface__
        return interface


def _device_datatype(name: str, source: Any) -> str:
    interface = getattr(source, "__cuda_array_interface__", None)
    if interface is None:
        raise NaiadError(
            f"cannot tell the datatype of device tensor '{name}': it has no __cuda_array_interface__; "
            "pass datatype= (e.g. 'FP16') to Tensor.from_dlpack",
            ErrorCode.INVALID_ARG,
        )
    return datatypes.from_numpy(np.dtype(interface["typestr"])).wire


def _copy_to_host(source: Any, datatype: str, name: str) -> npt.NDArray[Any]:
    """A host copy of a device array, through the framework that owns it (CuPy or torch)."""
    bf16 = datatype == "BF16"
    if hasattr(source, "get") and hasattr(source, "__cuda_array_interface__"):  # a CuPy array
        array: npt.NDArray[Any] = source.get()
        return array.view(np.uint16) if bf16 else array
    if importlib.util.find_spec("torch") is not None:
        torch: Any = importlib.import_module("torch")
        tensor = source if isinstance(source, torch.Tensor) else torch.utils.dlpack.from_dlpack(source)
        tensor = tensor.detach()
        if bf16:  # numpy has no bfloat16: carry the bit patterns
            return tensor.view(torch.int16).cpu().numpy().view(np.uint16)  # type: ignore[no-any-return]
        return tensor.cpu().numpy()  # type: ignore[no-any-return]
    if importlib.util.find_spec("cupy") is not None:
        cupy: Any = importlib.import_module("cupy")
        array = cupy.from_dlpack(source).get()
        return array.view(np.uint16) if bf16 else array
    raise NaiadError(
        f"tensor '{name}' is in device memory and neither torch nor cupy is installed to copy it to the host; "
        "install one of them, or have the backend return host arrays",
        ErrorCode.INTERNAL,
    )
