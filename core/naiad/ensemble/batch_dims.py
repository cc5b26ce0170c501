"""Passing tensors between batching and non-batching models of one ensemble, as Triton does.

Each ensemble tensor remembers the batch size of the request that made it (0 when that model does
not batch). A tensor goes to a model, or into the ensemble's answer, unchanged unless one side
batches and the other does not:

- from a non-batching source to a batching model: if its whole shape fits the model's ``dims``, it
  gains a leading batch dimension of 1;
- from a batching source to a non-batching model: if its shape does not fit ``dims`` and it is a
  batch of 1, it loses its batch dimension.

Anything else goes as it is, and the model's own shape check says what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fits(dims: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether ``shape`` is ``dims`` with each -1 (in either) standing for any size."""
    return len(dims) == len(shape) and all(d == -1 or s == -1 or d == s for d, s in zip(dims, shape, strict=True))


def fit_batch_dimension(data: Any, dims: Sequence[int], batching: bool, batch_size: int) -> Any:
    """``data`` (made with ``batch_size``, 0 if unbatched) as a model with ``dims`` and ``batching`` takes it.

    Works for numpy arrays and for device arrays with ``reshape``."""
    if batching == (batch_size != 0):
        return data
    shape = tuple(data.shape)
    if batching:
        return data.reshape((1, *shape)) if fits(dims, shape) else data
    if batch_size == 1 and not fits(dims, shape):
        return data.reshape(shape[1:])
    return data
