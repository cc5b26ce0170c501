"""Ragged batching: the tensors Triton's backends build for ``allow_ragged_batch`` inputs,
``batch_input`` and ``batch_output``.

A batch of requests whose ragged input has a different length in each request reaches the engine
as one flat tensor of every request's elements, in request order, next to the ``batch_input``
tensors that tell the requests apart (Triton's kinds, with its shapes):

- ``BATCH_ELEMENT_COUNT``: ``[requests]``, each request's element count of the source input;
- ``BATCH_ACCUMULATED_ELEMENT_COUNT``: ``[requests]``, the running total of those counts;
- ``BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO``: ``[requests + 1]``, the same after a 0;
- ``BATCH_MAX_ELEMENT_COUNT_AS_SHAPE``: ``[largest count]``, meant for its shape (zeros);
- ``BATCH_ITEM_SHAPE``: ``[batch items, rank - 1]``, each batch item's shape without the batch
  dimension; ``BATCH_ITEM_SHAPE_FLATTEN``: the same values flat.

A ``batch_output`` of kind ``BATCH_SCATTER_WITH_INPUT_SHAPE`` goes back to each request in the shape
of its source input: the output's ``-1`` dimensions take the source input's sizes, and each request
takes that many elements of the flat output, in request order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.inference import InferenceRequest
from naiad.protocol.model_config_pb2 import BatchInput, DataType, ModelConfig

_KIND = BatchInput.Kind


def shape_key(request: InferenceRequest, ragged: frozenset[str], batching: bool) -> tuple[Any, ...]:
    """What must match for two requests to share a batch: input names and non-batch shapes (a ragged
    input's shape never matters)."""
    skip = 1 if batching else 0
    return tuple(
        sorted((name, () if name in ragged else tensor.shape[skip:]) for name, tensor in request.inputs.items())
    )


def flattened(requests: Sequence[InferenceRequest], name: str) -> npt.NDArray[Any]:
    """Every request's elements of the ragged input ``name``, one after the other."""
    return np.concatenate([request.inputs[name].numpy().reshape(-1) for request in requests])


def batch_inputs(config: ModelConfig, requests: Sequence[InferenceRequest]) -> dict[str, npt.NDArray[Any]]:
    """The ``batch_input`` tensors of ``config`` for one engine call over ``requests``, by target name."""
    tensors: dict[str, npt.NDArray[Any]] = {}
    for batch_input in config.batch_input:
        dtype = np.float32 if batch_input.data_type == DataType.TYPE_FP32 else np.int32
        array = batch_input_array(
            batch_input.kind, [request.inputs[batch_input.source_input[0]].shape for request in requests]
        )
        for target in batch_input.target_name:
            tensors[target] = array.astype(dtype)
    return tensors


def batch_input_array(kind: int, shapes: Sequence[tuple[int, ...]]) -> npt.NDArray[np.int64]:
    """The values of a ``batch_input`` of ``kind`` for requests whose source input has ``shapes``."""
    counts = np.array([int(np.prod(shape)) for shape in shapes], dtype=np.int64)
    if kind == _KIND.BATCH_ELEMENT_COUNT:
        return counts
    if kind == _KIND.BATCH_ACCUMULATED_ELEMENT_COUNT:
        return np.cumsum(counts)
    if kind == _KIND.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO:
        return np.concatenate([[0], np.cumsum(counts)])
    if kind == _KIND.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE:
        return np.zeros(int(counts.max()), dtype=np.int64)
    items = [shape[1:] for shape in shapes for _ in range(shape[0])]  # BATCH_ITEM_SHAPE(_FLATTEN)
    rank = len(shapes[0]) - 1
    array = np.array(items, dtype=np.int64).reshape(len(items), rank)
    return array.reshape(-1) if kind == _KIND.BATCH_ITEM_SHAPE_FLATTEN else array


def scattered(
    array: npt.NDArray[Any], dims: Sequence[int], sources: Sequence[tuple[int, ...]]
) -> list[npt.NDArray[Any]]:
    """A ``BATCH_SCATTER_WITH_INPUT_SHAPE`` output split per request: ``dims`` is the output's shape
    with its batch dimension, ``sources`` each request's shape of the source input."""
    flat = array.reshape(-1)
    parts = []
    offset = 0
    for source in sources:
        shape = tuple(source[index] if dim == -1 else dim for index, dim in enumerate(dims))
        size = int(np.prod(shape))
        parts.append(flat[offset : offset + size].reshape(shape))
        offset += size
    return parts
