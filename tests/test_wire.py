"""Tensors' wire bytes: little-endian, row-major, the tensor's own memory where it already is so."""

from __future__ import annotations

import numpy as np

from naiad.tensor import Tensor
from naiad.wire import wire_array


def test_a_contiguous_little_endian_tensor_goes_out_from_its_own_memory() -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    wire = wire_array(Tensor("x", "FP32", data))
    assert np.shares_memory(wire, data)
    assert wire.tobytes() == data.astype("<f4").tobytes()


def test_a_transposed_tensor_goes_out_row_major() -> None:
    data = np.arange(6, dtype=np.int32).reshape(2, 3).T
    wire = wire_array(Tensor("x", "INT32", data))
    assert not np.shares_memory(wire, data)
    assert wire.tobytes() == np.ascontiguousarray(data).astype("<i4").tobytes()


def test_a_big_endian_tensor_goes_out_little_endian() -> None:
    data = np.array([1, 256], dtype=">u2")
    assert wire_array(Tensor("x", "UINT16", data)).tobytes() == b"\x01\x00\x00\x01"


def test_one_byte_and_bytes_tensors() -> None:
    assert wire_array(Tensor("b", "BOOL", np.array([True, False]))).tobytes() == b"\x01\x00"
    text = np.array([b"ab"], dtype=np.object_)
    assert wire_array(Tensor("t", "BYTES", text)).tobytes() == b"\x02\x00\x00\x00ab"
