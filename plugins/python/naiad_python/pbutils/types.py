"""Datatype helpers and BYTES (de)serialisation, reproducing Triton's pure-Python functions.

These mirror ``triton_python_backend_utils.py`` from Triton 2.51 exactly, including its
quirks (``serialize_byte_tensor`` returns ``()`` for an empty array and ``None`` for a
non-BYTES dtype), because existing models depend on them.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np
import numpy.typing as npt

TRITON_STRING_TO_NUMPY: dict[str, type[Any]] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

_NUMBER_TO_NUMPY: dict[int, type[Any]] = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}

BYTES = 13
BF16 = 14


def triton_string_to_numpy(triton_type_string: str) -> type[Any]:
    """The numpy type for a config type name such as ``"TYPE_FP32"`` (``KeyError`` if unknown)."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> type[Any] | None:
    """The numpy type for a ``DataType`` number (1 = BOOL … 13 = BYTES); ``None`` for others."""
    return _NUMBER_TO_NUMPY.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The ``DataType`` number for a numpy dtype or type; ``None`` when there is none."""
    try:
        return _remembered_triton_type(data_type)
    except TypeError:  # not hashable: nothing to remember it by
        return _triton_type(data_type)


def _triton_type(data_type: Any) -> int | None:
    for number, numpy_type in _NUMBER_TO_NUMPY.items():
        if number == BYTES:
            break
        if data_type == numpy_type:
            return number
    if data_type == np.object_ or data_type == np.bytes_:
        return BYTES
    return None


_remembered_triton_type = functools.lru_cache(maxsize=256)(_triton_type)  # a few types and dtypes, asked often


def serialize_byte_tensor(input_tensor: npt.NDArray[Any]) -> bytes | tuple[()] | None:
    """Concatenate ``<uint32 LE length><bytes>`` for every element, in C order.

    ``bytes`` elements of an object array are kept as they are, any other object becomes
    ``str(obj).encode("utf-8")``; ``np.bytes_`` arrays lose trailing NULs (numpy strips
    them). Returns ``()`` for an empty array and ``None`` for a non-BYTES dtype, as Triton does.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype == np.object_ or input_tensor.dtype.type == np.bytes_:
        parts: list[bytes] = []
        for item in input_tensor.flatten(order="C").tolist():
            if input_tensor.dtype == np.object_:
                encoded = item if type(item) is bytes else str(item).encode("utf-8")
            else:
                encoded = item
            parts.append(struct.pack("<I", len(encoded)))
            parts.append(encoded)
        return b"".join(parts)
    return None


def deserialize_bytes_tensor(encoded_tensor: bytes | bytearray | memoryview) -> npt.NDArray[np.object_]:
    """Split a length-prefixed buffer into a 1-D ``np.object_`` array of ``bytes``."""
    items: list[bytes] = []
    offset = 0
    while offset < len(encoded_tensor):
        (length,) = struct.unpack_from("<I", encoded_tensor, offset)
        offset += 4
        (item,) = struct.unpack_from(f"<{length}s", encoded_tensor, offset)
        offset += length
        items.append(item)
    return np.array(items, dtype=np.object_)
