"""Config ``reshape``: the shape a model takes or gives for a tensor, where clients see ``dims``.

As in Triton, the core hands a backend every input in its reshaped form (after checking the
client's shape against ``dims``) and brings every output the backend gives in its reshape form to
its ``dims`` (the response pipeline's first stage).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from naiad.tensor import Tensor

Reshape = tuple[tuple[int, ...], tuple[int, ...]]  # a tensor's shape in one form, then in the other


def config_reshape(array: Any, source: Sequence[int], target: Sequence[int], batch_dims: int) -> Any:
    """``array`` (shaped ``[batch] + source``) reshaped to ``[batch] + target``.

    Variable (-1) dimensions of ``target`` take, in order, the sizes ``array`` has where ``source``
    is variable (Triton's rule). Works for numpy arrays and for device arrays with ``reshape``.
    """
    shape = tuple(array.shape)
    variable = deque(shape[batch_dims + index] for index, dim in enumerate(source) if dim == -1)
    new_shape = list(shape[:batch_dims])
    for dim in target:
        new_shape.append(variable.popleft() if dim == -1 and variable else dim)
    return array.reshape(new_shape)


def model_shaped(inputs: Mapping[str, Tensor], reshapes: Mapping[str, Reshape], batching: bool) -> dict[str, Tensor]:
    """``inputs`` with each one that ``reshapes`` names (``dims``, ``reshape``) in its reshaped form."""
    shaped = dict(inputs)
    for name, (dims, reshape) in reshapes.items():
        tensor = shaped.get(name)
        if tensor is not None:
            data = config_reshape(tensor.data, dims, reshape, 1 if batching else 0)
            shaped[name] = Tensor(tensor.name, tensor.datatype, data, tensor.memory, tensor.device_id)
    return shaped
