"""Raw tensor bytes as both protocols carry them: little-endian, row-major, BYTES length-prefixed."""

from __future__ import annotations

import math
import struct
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import ByteSizeMismatch, NaiadError, invalid_arg, request_prefix
from naiad.tensor import Tensor
from naiad.validation import string_count_mismatch

INT64_MAX = 2**63 - 1
MAX_DIMS = 64
"""numpy's limit on an array's dimensions."""
_SURELY_FITS = 2**32
"""Element counts up to this fit any datatype's byte size in int64."""


def from_bytes(
    chunk: memoryview | bytes | bytearray,
    datatype: datatypes.DataType,
    shape: list[int],
    name: str,
    model_name: str,
    request_id: str,
) -> npt.NDArray[Any]:
    """A tensor from its raw little-endian bytes (a view, not a copy, for fixed-size types)."""
    count = element_count(name, shape, datatype)
    if datatype.wire == "BYTES":
        try:
            items = datatypes.deserialize_bytes(chunk, count)
        except NaiadError:
            raise ByteSizeMismatch(_bytes_refusal(chunk, count, name, model_name, request_id)) from None
        return items.reshape(shape)
    expected = count * datatype.byte_size
    if len(chunk) != expected:
        raise ByteSizeMismatch(
            f"{request_prefix(request_id)}input byte size mismatch for input '{name}' for model "
            f"'{model_name}'. Expected {expected}, got {len(chunk)}"
        )
    return np.frombuffer(chunk, dtype=datatype.numpy.newbyteorder("<")).reshape(shape)


def _bytes_refusal(
    chunk: memoryview | bytes | bytearray, count: int, name: str, model_name: str, request_id: str
) -> str:
    """Triton's words for BYTES data that does not hold ``count`` length-prefixed elements, found by
    walking it as Triton does: a length prefix cut short, one element too many, the wrong number of
    elements, or (with the right number) a last element cut short."""
    view = memoryview(chunk)
    offset, end, checked = 0, len(view), 0
    while offset < end:
        if end - offset < 4:
            return (
                f"{request_prefix(request_id)}incomplete string length indicator for inference input '{name}' for "
                f"model '{model_name}', expecting 4 bytes but only {end - offset} bytes available. Please make "
                "sure the string length indicator is in one buffer."
            )
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        checked += 1
        if checked > count:
            return (
                f"{request_prefix(request_id)}unexpected number of string elements {checked} for inference input "
                f"'{name}' for model '{model_name}', expecting {count}"
            )
        if length > end - offset:
            if checked == count:
                return (
                    f"incomplete string data for inference input '{name}', expecting string of length {length} "
                    f"but only {end - offset} bytes available"
                )
            break
        offset += length
    return string_count_mismatch(checked, count, name, model_name, request_id)


def wire_array(tensor: Tensor) -> npt.NDArray[np.uint8]:
    """The wire bytes of a tensor as a flat ``uint8`` array (copied to the host first if it is on a
    device): little-endian, row-major, BYTES length-prefixed; a view of the data when it already is so."""
    data = tensor.numpy()
    if tensor.datatype == "BYTES":
        return np.frombuffer(datatypes.serialize_bytes(data), np.uint8)
    if data.flags.c_contiguous and data.dtype.byteorder in _LITTLE_ENDIAN:  # the usual case: as it is
        return data.reshape(-1).view(np.uint8)
    return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).reshape(-1).view(np.uint8)


# numpy's byte orders that mean little-endian here: its own, native ("=") on a little-endian machine,
# and "not applicable" ("|", one-byte types)
_LITTLE_ENDIAN = frozenset("<|=") if sys.byteorder == "little" else frozenset("<|")


def tensor_bytes(tensor: Tensor) -> memoryview:
    """:func:`wire_array` as a byte view: the tensor's own memory where it already is in wire order, not a copy."""
    return wire_array(tensor).data


def element_count(name: str, shape: list[int], datatype: datatypes.DataType) -> int:
    """The shape's element count, once sure numpy can build an array of that shape (INVALID_ARG if not).

    Triton's texts where Triton checks the same (dimensions of 2^63 and more, a count or a byte size
    past int64); numpy also refuses more than 64 dimensions, and dimensions whose product overflows
    even when another dimension is 0.
    """
    if len(shape) <= MAX_DIMS:
        count = math.prod(shape)
        if 0 < count <= _SURELY_FITS:  # the usual case: no dimension is 0 or large
            return count
    text = "[" + ",".join(str(dim) for dim in shape) + "]"
    if len(shape) > MAX_DIMS:
        raise invalid_arg(
            f"invalid shape for input '{name}': {len(shape)} dimensions, more than the {MAX_DIMS} supported"
        )
    if any(dim > INT64_MAX for dim in shape):
        raise invalid_arg(f"invalid shape for input '{name}': shape {text} contains one or more invalid dimensions")
    product = math.prod(dim for dim in shape if dim)
    count = product if all(shape) else 0
    if count > INT64_MAX:
        raise invalid_arg(
            f"invalid shape for input '{name}': shape {text} causes total element count to exceed maximum size "
            f"of {INT64_MAX}"
        )
    fixed = datatype.wire != "BYTES"
    if fixed and count * datatype.byte_size > INT64_MAX:
        raise invalid_arg(
            f"byte size overflow for input '{name}': element count ({count}) * data type size "
            f"({datatype.byte_size}) exceeds maximum allowed size ({INT64_MAX})"
        )
    most = INT64_MAX // (datatype.byte_size if fixed else 8)  # numpy holds BYTES as 8-byte references
    if product > most:
        raise invalid_arg(
            f"invalid shape for input '{name}': shape {text} is too large; its non-zero dimensions multiply "
            f"to more than the {most} elements an array of {datatype.wire} can have"
        )
    return count
