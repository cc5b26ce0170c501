"""CUDA shared-memory regions: device memory another process exported with ``cudaIpcGetMemHandle``.

The CUDA runtime is reached through ``cuda-python`` (``pip install 'naiad[cuda]'``). A region is
opened with ``cudaIpcOpenMemHandle`` and closed when it is unregistered and the last tensor viewing
it has gone (a view holds the region). Inputs reach GPU backends as device tensors without a host
round trip, through torch or CuPy when either is installed; otherwise they are copied to the host.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.errors import NaiadError, invalid_arg

IPC_HANDLE_SIZE = 64
"""Bytes in a ``cudaIpcMemHandle_t``."""


class CudaRuntime:
    """The few CUDA runtime and driver calls the regions need, through cuda-python."""

    def __init__(self, runtime: Any, driver: Any) -> None:
        self._runtime = runtime
        self._driver = driver

    @classmethod
    def probe(cls) -> tuple[CudaRuntime | None, str]:
        """The runtime if a CUDA device is usable, else None and why not (for the person reading the error)."""
        if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
            return None, "cuda-python is not installed (pip install 'naiad[cuda]')"
        runtime = importlib.import_module("cuda.bindings.runtime")
        driver = importlib.import_module("cuda.bindings.driver")
        error, count = runtime.cudaGetDeviceCount()
        if error != runtime.cudaError_t.cudaSuccess:
            return None, f"the CUDA runtime found no usable device ({_name(error)})"
        if count == 0:
            return None, "the CUDA runtime found no device"
        return cls(runtime, driver), ""

    def open(self, raw_handle: bytes, device_id: int) -> int:
        """The device address of the allocation a client's IPC handle names."""
        self._check(self._runtime.cudaSetDevice(device_id)[0], f"cudaSetDevice({device_id})")
        handle = self._runtime.cudaIpcMemHandle_t()
        ctypes.memmove(handle.getPtr(), raw_handle, IPC_HANDLE_SIZE)
        error, pointer = self._runtime.cudaIpcOpenMemHandle(handle, self._runtime.cudaIpcMemLazyEnablePeerAccess)
        self._check(error, "cudaIpcOpenMemHandle")
        return int(pointer)

    def allocation_size(self, pointer: int) -> int:
        """The size of the allocation that starts at ``pointer``."""
        error, _base, size = self._driver.cuMemGetAddressRange(pointer)
        if error != self._driver.CUresult.CUDA_SUCCESS:
            raise NaiadError(f"cuMemGetAddressRange failed: {_name(error)}")
        return int(size)

    def close(self, pointer: int) -> None:
        self._runtime.cudaIpcCloseMemHandle(pointer)

    def copy(self, destination: int, source: int, byte_size: int) -> None:
        """Copy between any two addresses (host or device: unified addressing tells which)."""
        kind = self._runtime.cudaMemcpyKind.cudaMemcpyDefault
        self._check(self._runtime.cudaMemcpy(destination, source, byte_size, kind)[0], "cudaMemcpy")

    def _check(self, error: Any, call: str) -> None:
        if error != self._runtime.cudaError_t.cudaSuccess:
            raise NaiadError(f"{call} failed: {_name(error)}")


def _name(error: Any) -> str:
    return str(getattr(error, "name", error))


class CudaRegion:
    """A registered CUDA IPC allocation of ``byte_size`` bytes on device ``device_id``."""

    kind = "cuda"

    def __init__(self, runtime: CudaRuntime, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        if len(raw_handle) != IPC_HANDLE_SIZE:
            raise invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
        self.runtime = runtime
        self.name = name
        self.device_id = device_id
        self.byte_size = byte_size
        try:
            self.pointer = runtime.open(raw_handle, device_id)
        except NaiadError as error:
            raise invalid_arg(f"failed to register shared memory region: invalid args ({error.message})") from None
        weakref.finalize(self, runtime.close, self.pointer)
        if byte_size == 0 or byte_size > runtime.allocation_size(self.pointer):
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def window(self, offset: int, byte_size: int) -> CudaWindow:
        return CudaWindow(self, self.pointer + offset, byte_size)

    def close(self) -> None:
        """Nothing to do now: the handle closes when the region and its last window are gone."""


@dataclass(frozen=True, slots=True)
class CudaWindow:
    """``byte_size`` bytes at device address ``pointer`` of a region (which it keeps open)."""

    region: CudaRegion
    pointer: int
    byte_size: int

    def to_host(self) -> bytes:
        host = bytearray(self.byte_size)
        if self.byte_size:
            address = ctypes.addressof((ctypes.c_char * self.byte_size).from_buffer(host))
            self.region.runtime.copy(address, self.pointer, self.byte_size)
        return bytes(host)

    def device_array(self, dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any | None:
        """A torch or CuPy array over the window (no copy), or None when neither is installed."""
        view = _CudaArrayView(self, dtype, shape)
        if importlib.util.find_spec("torch") is not None:
            torch: Any = importlib.import_module("torch")
            return torch.as_tensor(view, device=f"cuda:{self.region.device_id}")
        if importlib.util.find_spec("cupy") is not None:
            cupy: Any = importlib.import_module("cupy")
            with cupy.cuda.Device(self.region.device_id):
                return cupy.asarray(view)
        return None

    def write(self, data: npt.NDArray[Any] | None, device_pointer: int | None, byte_size: int) -> None:
        """Copy ``byte_size`` bytes from a contiguous host array or a device address into the window."""
        if device_pointer is not None:
            self.region.runtime.copy(self.pointer, device_pointer, byte_size)
        elif data is not None and byte_size:
            self.region.runtime.copy(self.pointer, data.ctypes.data, byte_size)


class _CudaArrayView:
    """``__cuda_array_interface__`` over a window; holding it holds the region open."""

    def __init__(self, window: CudaWindow, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self._window = window
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (window.pointer, False),
            "version": 3,
            "strides": None,
        }


def no_gpu(name: str, reason: str) -> NaiadError:
    """The error for CUDA shared-memory registration on a server that has no usable GPU."""
    return invalid_arg(
        f"failed to register CUDA shared memory region: '{name}', GPUs not supported: this server has no GPU it "
        f"can use ({reason}); use system shared memory (tritonclient.utils.shared_memory) instead"
    )
