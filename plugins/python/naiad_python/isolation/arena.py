"""Anonymous shared memory for tensor bytes, and tensors written to and read from it.

An arena is a ``memfd`` (no name in ``/dev/shm``, owner-only by construction) mapped by both
processes; its descriptor crosses the socket once, with the first message that uses it. The writer
of each direction owns the arena it writes: it allocates from the start, and starts over once the
reader has released everything it sent (every message is released right after it is read). A
message too large for the arena comes with a new, larger one, up to :data:`ONESHOT_ABOVE`; a larger
message gets a memfd of its own (a negative arena id) that neither side keeps: the writer unmaps it at
once, the reader's mapping goes with the last tensor viewing it, so a 1 GiB request leaves nothing
resident behind it.

A :class:`ScratchArena` holds the responses one batch's ``execute`` returned: they go to the server with
the news that the batch ended, the server copies them out before it sends the next batch, so the arena
is free again at each batch without a release message.
"""

from __future__ import annotations

import functools
import itertools
import mmap
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import NaiadError, Tensor, datatypes, wire_array

MIN_ARENA = 1 << 20
ONESHOT_ABOVE = 16 << 20
_ALIGN = 64
_ids = itertools.count(1)

TensorSpec = tuple[str, str, tuple[int, ...], int, int]
"""A tensor in an arena: name, Triton datatype, shape, offset, byte size."""


def _aligned(size: int) -> int:
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN


@functools.cache
def _little_endian(datatype: str) -> np.dtype[Any]:
    """The numpy dtype of a (non-BYTES) Triton datatype's bytes as they cross."""
    return datatypes.BY_WIRE[datatype].numpy.newbyteorder("<")


class _Mapped:
    """A writer's current arena: its id, mapping, size and the next free offset."""

    def __init__(self) -> None:
        self._id = 0
        self._map: mmap.mmap | None = None
        self._size = 0
        self._head = 0

    def _replace(self, size: int) -> int:
        """Map a new arena of ``size`` bytes in place of the current one; its descriptor to pass along."""
        fd = os.memfd_create("naiad-python-arena", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(fd, size)
        self._id, self._size, self._head = next(_ids), size, 0
        return fd

    def _unmap(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


class WriteArena(_Mapped):
    """The writing side: allocate space for a message's tensors, reuse it once the reader released it."""

    def __init__(self) -> None:
        super().__init__()
        self._condition = threading.Condition()
        self._unreleased = 0

    def write(self, tensors: Sequence[Tensor]) -> tuple[int, list[TensorSpec], int | None]:
        """Copy ``tensors`` in; returns the arena id, their specs, and a descriptor to pass along when
        the arena is new (the caller closes it after sending). Blocks while the reader still holds
        messages and there is no room."""
        arrays, needed = _wire(tensors)
        if needed > ONESHOT_ABOVE:
            written = _oneshot(tensors, arrays, needed)
            with self._condition:
                self._unreleased += 1  # released like any other message
            return written
        fd = None
        with self._condition:
            if self._map is None or self._head + needed > self._size:
                while self._unreleased:  # the reader still holds offsets into this arena
                    self._condition.wait()
                if self._map is None or needed > self._size:
                    fd = self._replace(_arena_size(needed))
                else:
                    self._head = 0
            assert self._map is not None
            specs = _copy_in(self._map, tensors, arrays, self._head)
            self._head += needed
            self._unreleased += 1
            return self._id, specs, fd

    def released(self, count: int = 1) -> None:
        """The reader is done with ``count`` more messages."""
        with self._condition:
            self._unreleased -= count
            self._condition.notify_all()

    def close(self) -> None:
        with self._condition:
            self._unmap()


class ScratchArena(_Mapped):
    """The writing side for one batch's returned responses: never waits, starts over at each batch.

    Only the thread that runs batches writes it. When a batch's responses outgrow it, a larger arena
    takes its place mid-batch (the reader maps each new arena as it reaches the first response in it).
    """

    def begin_batch(self) -> None:
        """The reader has copied out every response of the previous batch: reuse the space."""
        self._head = 0

    def write(self, tensors: Sequence[Tensor]) -> tuple[int, list[TensorSpec], int | None]:
        """Copy ``tensors`` in, as :meth:`WriteArena.write` does, without ever waiting."""
        arrays, needed = _wire(tensors)
        if needed > ONESHOT_ABOVE:
            return _oneshot(tensors, arrays, needed)
        fd = None
        if self._map is None or self._head + needed > self._size:
            fd = self._replace(_arena_size(max(needed, 2 * self._size)))
        assert self._map is not None
        specs = _copy_in(self._map, tensors, arrays, self._head)
        self._head += needed
        return self._id, specs, fd

    def close(self) -> None:
        self._unmap()


def _wire(tensors: Sequence[Tensor]) -> tuple[list[npt.NDArray[Any]], int]:
    """Each tensor's wire bytes, and the space they take in an arena, each aligned."""
    arrays = []
    needed = 0
    for tensor in tensors:
        array = wire_array(tensor)
        arrays.append(array)
        needed += _aligned(array.nbytes)
    return arrays, needed


def _arena_size(needed: int) -> int:
    return max(MIN_ARENA, 1 << (needed - 1).bit_length())


def _oneshot(
    tensors: Sequence[Tensor], arrays: Sequence[npt.NDArray[Any]], size: int
) -> tuple[int, list[TensorSpec], int]:
    """A memfd for one message alone (a negative id), written and unmapped here."""
    fd = os.memfd_create("naiad-python-message", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as mapped:
            specs = _copy_in(mapped, tensors, arrays, 0)
    except BaseException:
        os.close(fd)
        raise
    return -next(_ids), specs, fd


def _copy_in(
    target: mmap.mmap, tensors: Sequence[Tensor], arrays: Sequence[npt.NDArray[Any]], start: int
) -> list[TensorSpec]:
    """Copy ``arrays`` into ``target`` from ``start`` on, each aligned; their specs."""
    specs: list[TensorSpec] = []
    offset = start
    for tensor, array in zip(tensors, arrays, strict=True):
        size = array.nbytes
        if size:
            target[offset : offset + size] = array.data  # flat bytes: see wire_array
        specs.append((tensor.name, tensor.datatype, tensor.shape, offset, size))
        offset += _aligned(size)
    return specs


class ReadArena:
    """The reading side: the writer's current arena, mapped read-only, and messages of their own."""

    def __init__(self) -> None:
        self._id = 0
        self._view: memoryview | None = None
        self._oneshots: dict[int, memoryview] = {}  # mapped, not yet read

    @property
    def arena_id(self) -> int:
        """The arena mapped now (0 before the first)."""
        return self._id

    def adopt(self, arena_id: int, fd: int) -> None:
        """Map the writer's new arena, or a message's own (a negative id); the descriptor is closed here."""
        try:
            size = os.fstat(fd).st_size
            if arena_id < 0:  # private and writable: its tensors are handed on as they are, never copied
                private = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                self._oneshots[arena_id] = memoryview(private)
            else:
                self._view, self._id = memoryview(mmap.mmap(fd, size, prot=mmap.PROT_READ)), arena_id
        finally:
            os.close(fd)

    def tensors(self, arena_id: int, specs: Sequence[TensorSpec], *, copy: bool) -> list[Tensor]:
        """The tensors ``specs`` describe: copies, or read-only views valid until the message is released.
        A message of its own is never copied: its views stay valid (and mapped) while they live."""
        return [Tensor(name, datatype, data) for name, datatype, data in self.arrays(arena_id, specs, copy=copy)]

    def arrays(
        self, arena_id: int, specs: Sequence[TensorSpec], *, copy: bool
    ) -> list[tuple[str, str, npt.NDArray[Any]]]:
        """What :meth:`tensors` gives, as (name, datatype, array)."""
        view = self._oneshots.pop(arena_id, None) if arena_id < 0 else self._view
        copy = copy and arena_id >= 0
        if view is None or (arena_id >= 0 and arena_id != self._id):
            raise NaiadError(f"tensor data arrived in arena {arena_id}, but arena {self._id} is mapped")
        result = []
        for name, datatype_name, shape, offset, size in specs:
            data: npt.NDArray[Any]
            if datatype_name == "BYTES":
                count = int(np.prod(shape)) if shape else 1
                data = datatypes.deserialize_bytes(view[offset : offset + size], count).reshape(shape)
            elif size:
                data = np.ndarray(shape, _little_endian(datatype_name), view, offset)
                if copy:
                    data = data.copy()
            else:
                data = np.empty(shape, _little_endian(datatype_name))
            result.append((name, datatype_name, data))
        return result
