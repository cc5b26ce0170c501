"""numpy arrays <-> torch tensors and ``List[str]``, with Triton's datatype names.

BF16 travels through naiad as the raw 16-bit patterns in ``uint16`` arrays; BYTES elements
become ``str`` (UTF-8) for TorchScript ``List[str]`` and come back as ``bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from naiad.backend import DataType, invalid_arg

TORCH_DTYPE: dict[int, torch.dtype] = {
    DataType.TYPE_BOOL: torch.bool,
    DataType.TYPE_UINT8: torch.uint8,
    DataType.TYPE_INT8: torch.int8,
    DataType.TYPE_INT16: torch.int16,
    DataType.TYPE_INT32: torch.int32,
    DataType.TYPE_INT64: torch.int64,
    DataType.TYPE_FP16: torch.float16,
    DataType.TYPE_FP32: torch.float32,
    DataType.TYPE_FP64: torch.float64,
    DataType.TYPE_BF16: torch.bfloat16,
}
CONFIG_TYPE: dict[torch.dtype, int] = {dtype: number for number, dtype in TORCH_DTYPE.items()}


def type_name(dtype: torch.dtype) -> str:
    """Triton's config name for a torch dtype (``TYPE_FP32``), or the torch name if it has none."""
    number = CONFIG_TYPE.get(dtype)
    return DataType.Name(number) if number is not None else str(dtype)


def to_tensor(array: npt.NDArray[Any] | torch.Tensor, data_type: int) -> torch.Tensor:
    """A tensor sharing ``array``'s memory when it can (read-only arrays are copied); a device tensor
    (an input in CUDA shared memory) is used as it is."""
    if isinstance(array, torch.Tensor):
        return array.view(torch.bfloat16) if data_type == DataType.TYPE_BF16 else array
    if not array.flags.writeable:
        array = array.copy()
    if data_type == DataType.TYPE_BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_strings(name: str, array: npt.NDArray[Any]) -> list[str]:
    """A BYTES array as the ``List[str]`` TorchScript takes (UTF-8 decoded, flattened)."""
    strings = []
    for index, item in enumerate(array.reshape(-1)):
        try:
            strings.append(item.decode("utf-8") if isinstance(item, bytes) else str(item))
        except UnicodeDecodeError:
            raise invalid_arg(
                f"input '{name}' element {index} is not UTF-8 text; TorchScript List[str] inputs need UTF-8"
            ) from None
    return strings


def to_array(tensor: torch.Tensor) -> npt.NDArray[Any]:
    """A host numpy array of ``tensor`` (BF16 as its ``uint16`` bit patterns)."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def from_strings(strings: list[str]) -> npt.NDArray[np.object_]:
    """A TorchScript ``List[str]`` as a 1-D BYTES array."""
    out = np.empty(len(strings), dtype=np.object_)
    out[:] = [text.encode("utf-8") for text in strings]
    return out
