"""Triton datatypes: wire names, config enum names, numpy dtypes, and BYTES encoding.

BYTES tensors are numpy object arrays of ``bytes``; on the wire each element is a
4-byte little-endian length followed by its bytes. BF16 has no numpy type, so its
arrays carry the raw 16-bit patterns as ``uint16``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.errors import invalid_arg


@dataclass(frozen=True, slots=True)
class DataType:
    """One Triton datatype in all its spellings."""

    wire: str
    config: str
    numpy: np.dtype[Any]
    byte_size: int  # 0 for BYTES (variable length)
    number: int  # the ``inference.DataType`` enum value


_TYPES = [
    DataType("BOOL", "TYPE_BOOL", np.dtype(np.bool_), 1, 1),
    DataType("UINT8", "TYPE_UINT8", np.dtype(np.uint8), 1, 2),
    DataType("UINT16", "TYPE_UINT16", np.dtype(np.uint16), 2, 3),
    DataType("UINT32", "TYPE_UINT32", np.dtype(np.uint32), 4, 4),
    DataType("UINT64", "TYPE_UINT64", np.dtype(np.uint64), 8, 5),
    DataType("INT8", "TYPE_INT8", np.dtype(np.int8), 1, 6),
    DataType("INT16", "TYPE_INT16", np.dtype(np.int16), 2, 7),
    DataType("INT32", "TYPE_INT32", np.dtype(np.int32), 4, 8),
    DataType("INT64", "TYPE_INT64", np.dtype(np.int64), 8, 9),
    DataType("FP16", "TYPE_FP16", np.dtype(np.float16), 2, 10),
    DataType("FP32", "TYPE_FP32", np.dtype(np.float32), 4, 11),
    DataType("FP64", "TYPE_FP64", np.dtype(np.float64), 8, 12),
    DataType("BYTES", "TYPE_STRING", np.dtype(np.object_), 0, 13),
    DataType("BF16", "TYPE_BF16", np.dtype(np.uint16), 2, 14),
]

BY_WIRE: dict[str, DataType] = {t.wire: t for t in _TYPES}
BY_CONFIG: dict[str, DataType] = {t.config: t for t in _TYPES}
BY_NUMBER: dict[int, DataType] = {t.number: t for t in _TYPES}
_BY_NUMPY: dict[np.dtype[Any], DataType] = {t.numpy: t for t in _TYPES if t.wire not in ("BF16",)}


def from_wire(name: str) -> DataType:
    """The datatype for a protocol name such as ``FP32``; INVALID_ARG if unknown."""
    try:
        return BY_WIRE[name]
    except KeyError:
        raise invalid_arg(f"invalid datatype '{name}'") from None


def from_numpy(dtype: npt.DTypeLike) -> DataType:
    """The datatype for a numpy dtype; ``bytes_``/``str_`` arrays map to BYTES."""
    resolved = np.dtype(dtype)
    if resolved.kind in ("S", "U", "O"):
        return BY_WIRE["BYTES"]
    try:
        return _BY_NUMPY[resolved.newbyteorder("=")]
    except KeyError:
        raise invalid_arg(f"numpy dtype '{resolved}' has no Triton datatype") from None


def to_bytes_array(array: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """Normalise a BYTES-like array (object, ``bytes_`` or ``str_``) to an object array of bytes."""
    if array.dtype == np.object_ and all(type(item) is bytes for item in array.flat):
        return array
    out = np.empty(array.shape, dtype=np.object_)
    for index, item in enumerate(array.flat):
        out.flat[index] = _as_bytes(item)
    return out


def _as_bytes(item: object) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, np.bytes_):
        return bytes(item)
    return str(item).encode("utf-8")


def serialize_bytes(array: npt.NDArray[Any]) -> bytes:
    """Encode a BYTES tensor as concatenated ``<uint32 LE length><bytes>`` elements."""
    items = [_as_bytes(item) for item in np.asarray(array, dtype=np.object_).flat]
    return b"".join([piece for item in items for piece in (_LENGTH.pack(len(item)), item)])


_LENGTH = struct.Struct("<I")


def deserialize_bytes(buffer: bytes | bytearray | memoryview, count: int | None = None) -> npt.NDArray[np.object_]:
    """Decode a length-prefixed BYTES buffer into a flat object array.

    When ``count`` is given the buffer must hold exactly that many elements.
    """
    view = memoryview(buffer)
    items: list[bytes] = []
    offset = 0
    end = len(view)
    while offset < end:
        if offset + 4 > end:
            raise invalid_arg("BYTES tensor data is truncated inside a 4-byte length prefix")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > end:
            raise invalid_arg(f"BYTES element {len(items)} declares {length} bytes but only {end - offset} remain")
        items.append(bytes(view[offset : offset + length]))
        offset += length
    if count is not None and len(items) != count:
        raise invalid_arg(f"expected {count} BYTES elements, the data holds {len(items)}")
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def element_count(shape: tuple[int, ...] | list[int]) -> int:
    """Number of elements of a shape (1 for a scalar shape)."""
    count = 1
    for dim in shape:
        count *= dim
    return count


def zeros(datatype: DataType, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """A tensor of zeros (empty strings for BYTES), as Triton fills zero data."""
    if datatype.wire == "BYTES":
        return np.full(shape, b"", dtype=np.object_)
    return np.zeros(shape, dtype=datatype.numpy)


def from_raw(raw: bytes, datatype: DataType, shape: tuple[int, ...]) -> npt.NDArray[Any] | None:
    """A tensor read from the front of a file's bytes (BYTES: length-prefixed elements, exactly as
    many as the shape holds); None when a fixed-size type's bytes are too few."""
    count = element_count(shape)
    if datatype.wire == "BYTES":
        return deserialize_bytes(raw, count).reshape(shape)
    needed = count * datatype.byte_size
    if len(raw) < needed:
        return None
    return np.frombuffer(raw[:needed], dtype=datatype.numpy).reshape(shape).copy()
