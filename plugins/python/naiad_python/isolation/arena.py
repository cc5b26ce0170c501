"""Anonymous shared memory for tensor bytes, and tensors written to and read from it.

An arena is a ``memfd`` (no name in ``/dev/shm``, owner-only by construction) mapped by both
processes; its descriptor crosses the socket once, with the first message that uses it. The writer
of each direction owns the arena it writes: it allocates from the start, and starts over once the
reader has released everything it sent (every message is released right after it is read). A
message too large for the arena comes with a new, larger one.
"""

from __future__ import annotations

import itertools
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import NaiadError, Tensor, datatypes

MIN_ARENA = 1 << 20
_ALIGN = 64
_ids = itertools.count(1)

TensorSpec = tuple[str, str, tuple[int, ...], int, int]
"""A tensor in an arena: name, Triton datatype, shape, offset, byte size."""


def _aligned(size: int) -> int:
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN


def _wire(tensor: Tensor) -> npt.NDArray[Any]:
    """The tensor's bytes as they cross: contiguous little-endian, BYTES length-prefixed."""
    data = tensor.numpy()
    if tensor.datatype == "BYTES":
        return np.frombuffer(datatypes.serialize_bytes(data), np.uint8)
    return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))


class WriteArena:
    """The writing side: allocate space for a message's tensors, reuse it once the reader released it."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._id = 0
        self._map: mmap.mmap | None = None
        self._size = 0
        self._head = 0
        self._unreleased = 0

    def write(
        self, tensors: Sequence[Tensor], before_waiting: Callable[[], None] | None = None
    ) -> tuple[int, list[TensorSpec], int | None]:
        """Copy ``tensors`` in; returns the arena id, their specs, and a descriptor to pass along when
        the arena is new (the caller closes it after sending). Blocks while the reader still holds
        messages and there is no room; ``before_waiting`` runs first (to send messages held back)."""
        arrays = [_wire(tensor) for tensor in tensors]
        needed = sum(_aligned(array.nbytes) for array in arrays)
        fd = None
        with self._condition:
            if self._map is None or self._head + needed > self._size:
                while self._unreleased:  # the reader still holds offsets into this arena
                    if before_waiting is not None:
                        flush, before_waiting = before_waiting, None
                        self._condition.release()
                        try:
                            flush()
                        finally:
                            self._condition.acquire()
                        continue
                    self._condition.wait()
                if self._map is None or needed > self._size:
                    fd = self._replace(max(MIN_ARENA, 1 << (needed - 1).bit_length()))
                else:
                    self._head = 0
            specs: list[TensorSpec] = []
            assert self._map is not None
            for tensor, array in zip(tensors, arrays, strict=True):
                offset = self._head
                if array.nbytes:
                    self._map[offset : offset + array.nbytes] = array.reshape(-1).view(np.uint8).data
                specs.append((tensor.name, tensor.datatype, tuple(int(d) for d in tensor.shape), offset, array.nbytes))
                self._head += _aligned(array.nbytes)
            self._unreleased += 1
            return self._id, specs, fd

    def released(self, count: int = 1) -> None:
        """The reader is done with ``count`` more messages."""
        with self._condition:
            self._unreleased -= count
            self._condition.notify_all()

    def _replace(self, size: int) -> int:
        fd = os.memfd_create("naiad-python-arena", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(fd, size)
        self._id, self._size, self._head = next(_ids), size, 0
        return fd

    def close(self) -> None:
        with self._condition:
            if self._map is not None:
                self._map.close()
                self._map = None


class ReadArena:
    """The reading side: the writer's current arena, mapped read-only."""

    def __init__(self) -> None:
        self._id = 0
        self._view: memoryview | None = None

    @property
    def arena_id(self) -> int:
        """The arena mapped now (0 before the first)."""
        return self._id

    def adopt(self, arena_id: int, fd: int) -> None:
        """Map the writer's new arena (its descriptor is closed here)."""
        try:
            size = os.fstat(fd).st_size
            self._view = memoryview(mmap.mmap(fd, size, prot=mmap.PROT_READ))
            self._id = arena_id
        finally:
            os.close(fd)

    def tensors(self, arena_id: int, specs: Sequence[TensorSpec], *, copy: bool) -> list[Tensor]:
        """The tensors ``specs`` describe: copies, or read-only views valid until the message is released."""
        if arena_id != self._id or self._view is None:
            raise NaiadError(f"tensor data arrived in arena {arena_id}, but arena {self._id} is mapped")
        result = []
        for name, datatype_name, shape, offset, size in specs:
            chunk = self._view[offset : offset + size]
            datatype = datatypes.BY_WIRE[datatype_name]
            if datatype_name == "BYTES":
                count = int(np.prod(shape)) if shape else 1
                data: npt.NDArray[Any] = datatypes.deserialize_bytes(chunk, count).reshape(shape)
            else:
                data = np.frombuffer(chunk, dtype=datatype.numpy.newbyteorder("<")).reshape(shape)
                if copy:
                    data = data.copy()
            result.append(Tensor(name, datatype_name, data))
        return result
