"""The shared-memory arenas tensors cross the process boundary in, written and read in one process."""

from __future__ import annotations

import numpy as np

from naiad.backend import Tensor
from naiad_python.isolation.arena import MIN_ARENA, ReadArena, ScratchArena


def _tensor(value: float, count: int) -> Tensor:
    return Tensor("OUT", "FP32", np.full(count, value, np.float32))


def test_a_scratch_arena_grows_mid_batch_and_the_reader_follows_in_order() -> None:
    scratch, reader = ScratchArena(), ReadArena()
    quarter = MIN_ARENA // 4 // 4  # FP32 elements filling a quarter of the first arena
    written = [scratch.write([_tensor(index, quarter)]) for index in range(6)]  # the fifth needs a larger arena
    new_arenas = [index for index, (_, _, fd) in enumerate(written) if fd is not None]
    assert new_arenas == [0, 4]
    for index, (arena_id, specs, fd) in enumerate(written):
        if fd is not None:
            reader.adopt(arena_id, fd)
        (tensor,) = reader.tensors(arena_id, specs, copy=True)
        np.testing.assert_array_equal(tensor.numpy(), np.full(quarter, index, np.float32))
    scratch.close()


def test_each_batch_reuses_the_scratch_arena_from_its_start() -> None:
    scratch = ScratchArena()
    first_id, first_specs, fd = scratch.write([_tensor(1, 1000)])
    assert fd is not None
    for _ in range(100):  # many batches, each far smaller than the arena, never need a new one
        scratch.begin_batch()
        arena_id, specs, fd = scratch.write([_tensor(2, 1000)])
        assert (arena_id, specs, fd) == (first_id, first_specs, None)
    scratch.close()


def test_a_message_larger_than_any_arena_gets_memory_of_its_own() -> None:
    scratch, reader = ScratchArena(), ReadArena()
    arena_id, specs, fd = scratch.write([_tensor(3, 5_000_000)])  # 20 MB
    assert arena_id < 0
    assert fd is not None
    reader.adopt(arena_id, fd)
    (tensor,) = reader.tensors(arena_id, specs, copy=True)
    assert tensor.numpy().shape == (5_000_000,)
    assert float(tensor.numpy()[-1]) == 3.0
    scratch.close()
