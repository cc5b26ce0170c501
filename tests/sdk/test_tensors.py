"""Tensors that know where they live: memory kinds and DLPack exchange on the host."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.backend import MemoryKind, NaiadError, Tensor


def test_host_tensors_exchange_their_buffer_through_dlpack_without_a_copy() -> None:
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = Tensor.from_dlpack("X", source)
    assert (tensor.datatype, tensor.shape, tensor.memory, tensor.device_id) == ("FP32", (3, 4), MemoryKind.HOST, 0)
    assert np.shares_memory(tensor.numpy(), source)
    back = np.from_dlpack(tensor)  # a Tensor is itself a DLPack producer
    assert np.shares_memory(back, source)
    assert tensor.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(back, source)


def test_the_datatype_can_be_named_for_bit_patterns() -> None:
    patterns = np.array([0x3F80, 0x4000], dtype=np.uint16)  # 1.0 and 2.0 in bfloat16
    tensor = Tensor.from_dlpack("B", patterns, datatype="BF16")
    assert (tensor.datatype, tensor.numpy().tolist()) == ("BF16", [0x3F80, 0x4000])


def test_host_tensors_have_no_cuda_array_interface() -> None:
    tensor = Tensor("X", "FP32", np.zeros(2, dtype=np.float32))
    assert not hasattr(tensor, "__cuda_array_interface__")


class _FarDevice:
    """A DLPack producer on a device type naiad cannot serve (kDLVulkan = 7)."""

    def __dlpack_device__(self) -> tuple[int, int]:
        return (7, 0)


def test_an_unservable_device_is_refused_with_a_reason() -> None:
    with pytest.raises(NaiadError, match="DLPack device type 7, which naiad cannot serve"):
        Tensor.from_dlpack("X", _FarDevice())
