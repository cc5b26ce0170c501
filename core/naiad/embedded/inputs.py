"""Request inputs as the embedding program gives them: numpy arrays (or array-likes) and tensors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import invalid_arg
from naiad.tensor import Tensor

Inputs = Mapping[str, npt.ArrayLike | Tensor]
"""Input name -> a numpy array (or anything ``np.asarray`` takes) or a :class:`~naiad.tensor.Tensor`."""


def as_tensors(model: str, inputs: Inputs) -> list[Tensor]:
    """One tensor per input, holding the caller's array itself (str and bytes arrays become BYTES)."""
    tensors: list[Tensor] = []
    for name, value in inputs.items():
        if isinstance(value, Tensor):
            if value.name != name:
                raise invalid_arg(
                    f"input '{name}' for model '{model}' is given as tensor '{value.name}'; "
                    "name the tensor as its key, or pass the array itself"
                )
            tensors.append(value)
            continue
        array: npt.NDArray[Any] = value if isinstance(value, np.ndarray) else np.asarray(value)
        datatype = datatypes.from_numpy(array.dtype)
        data = datatypes.to_bytes_array(array) if datatype.wire == "BYTES" else array
        tensors.append(Tensor(name, datatype.wire, data))
    return tensors
