"""DLPack import and export on top of numpy's, plus BF16, which numpy cannot represent.

numpy does the real work (zero-copy, ownership, deleters). For BF16 the only thing
missing is the dtype: a BF16 tensor is carried as a ``uint16`` array, and its DLPack
capsule is the ``uint16`` capsule numpy produces with the ``DLDataType`` code patched to
``kDLBfloat`` on export, or patched back to ``kDLUInt`` before numpy consumes it on
import. Only CPU memory is handled: naiad keeps every tensor on the host.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad_python.pbutils.errors import TritonModelException

# DLDeviceType values this module accepts, and the DLDataType codes it touches.
_KDL_CPU = 1
_KDL_CUDA_HOST = 3
_DEVICE_NAMES = {2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm", 13: "CUDA managed"}
_KDL_UINT = 1
_KDL_BFLOAT = 4

_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


# Private prototypes, so that other libraries' argtypes on ctypes.pythonapi do not matter.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


class _CapsuleProducer:
    """Hands an existing capsule to ``np.from_dlpack``, which only takes producer objects."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDL_CPU, 0)


def is_capsule(obj: object) -> bool:
    """True for a PyCapsule (the legacy ``to_dlpack()`` result)."""
    return type(obj).__name__ == "PyCapsule"


def _dl_tensor(capsule: object) -> _DLTensor:
    """The DLTensor inside an unconsumed DLPack capsule (legacy or versioned)."""
    if _capsule_is_valid(capsule, _LEGACY):
        address = _capsule_get_pointer(capsule, _LEGACY)
        managed: _DLManagedTensor = _DLManagedTensor.from_address(address)
        return managed.dl_tensor  # type: ignore[no-any-return]
    if _capsule_is_valid(capsule, _VERSIONED):
        address = _capsule_get_pointer(capsule, _VERSIONED)
        versioned: _DLManagedTensorVersioned = _DLManagedTensorVersioned.from_address(address)
        return versioned.dl_tensor  # type: ignore[no-any-return]
    raise TritonModelException(
        "the DLPack capsule was already consumed or is not a DLPack capsule; a capsule can be used once"
    )


def from_dlpack(obj: object) -> tuple[npt.NDArray[Any], bool]:
    """Import a DLPack capsule or ``__dlpack__`` object as a numpy array, zero-copy.

    Returns the array and whether it holds BF16 data (then as ``uint16`` bit patterns).
    """
    if is_capsule(obj):
        capsule = obj
    elif hasattr(obj, "__dlpack__"):
        capsule = obj.__dlpack__(stream=None)
    else:
        raise TritonModelException(
            "Provided tensor is not supported. Tensor must be a DLPack capsule or have a `__dlpack__` attribute"
        )
    tensor = _dl_tensor(capsule)
    device = int(tensor.device.device_type)
    if device not in (_KDL_CPU, _KDL_CUDA_HOST):
        name = _DEVICE_NAMES.get(device, "unknown")
        raise TritonModelException(
            f"DLPack tensor is on device type {device} ({name}); naiad's python backend only handles "
            "CPU tensors: copy it to the host first (e.g. tensor.cpu())"
        )
    bf16 = tensor.dtype.code == _KDL_BFLOAT and tensor.dtype.bits == 16 and tensor.dtype.lanes == 1
    if bf16:
        tensor.dtype.code = _KDL_UINT
    if device == _KDL_CUDA_HOST:
        tensor.device.device_type = _KDL_CPU
        tensor.device.device_id = 0
    try:
        array: npt.NDArray[Any] = np.from_dlpack(_CapsuleProducer(capsule))  # type: ignore[arg-type]
    except (BufferError, TypeError, ValueError, RuntimeError) as error:
        raise TritonModelException(f"unable to import the DLPack tensor: {error}") from error
    if not array.flags.c_contiguous:
        raise TritonModelException(
            "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported."
        )
    return array, bf16


def to_dlpack(array: npt.NDArray[Any], *, bf16: bool, **kwargs: Any) -> object:
    """Export a C-contiguous host array as a DLPack capsule; ``bf16`` relabels ``uint16`` data."""
    capsule = array.__dlpack__(**kwargs)
    if bf16:
        _dl_tensor(capsule).dtype.code = _KDL_BFLOAT
    return capsule
