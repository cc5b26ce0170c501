"""Raw tensor bytes as both protocols carry them: little-endian, row-major, BYTES length-prefixed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import NaiadError, invalid_arg
from naiad.tensor import Tensor
from naiad.validation import request_prefix


def from_bytes(
    chunk: memoryview | bytes | bytearray,
    datatype: datatypes.DataType,
    shape: list[int],
    name: str,
    model_name: str,
    request_id: str,
) -> npt.NDArray[Any]:
    """A tensor from its raw little-endian bytes (a view, not a copy, for fixed-size types)."""
    count = math.prod(shape)
    if datatype.wire == "BYTES":
        try:
            items = datatypes.deserialize_bytes(chunk, count)
        except NaiadError as error:
            raise invalid_arg(
                f"{request_prefix(request_id)}input '{name}' for model '{model_name}' has invalid BYTES "
                f"data: {error.message}"
            ) from None
        return items.reshape(shape)
    expected = count * datatype.byte_size
    if len(chunk) != expected:
        raise invalid_arg(
            f"{request_prefix(request_id)}input byte size mismatch for input '{name}' for model "
            f"'{model_name}'. Expected {expected}, got {len(chunk)}"
        )
    return np.frombuffer(chunk, dtype=datatype.numpy.newbyteorder("<")).reshape(shape)


def tensor_bytes(tensor: Tensor) -> bytes:
    """The wire bytes of a tensor (copied to the host first if it is on a device): little-endian,
    row-major; BYTES length-prefixed."""
    data = tensor.numpy()
    if tensor.datatype == "BYTES":
        return datatypes.serialize_bytes(data)
    return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes()
