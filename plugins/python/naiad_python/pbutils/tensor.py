"""``pb_utils.Tensor``: a named numpy array with a Triton datatype.

Every tensor lives in host memory. BYTES tensors are captured when they are built (Triton
serialises them in the constructor), so changing the source array afterwards does not
change the tensor; numeric tensors keep a reference to their array, like Triton, and naiad
copies them when the response is sent. BF16 tensors carry ``uint16`` bit patterns and can
only be read or written through DLPack. A tensor naiad hands the model (a request input, a BLS
output) keeps the server's tensor it wraps, and goes on as that very tensor, without a copy, when
the model passes it to a response or a BLS request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from naiad_python.pbutils import dlpack
from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.text import text
from naiad_python.pbutils.types import BF16, BYTES, numpy_to_triton_type

if TYPE_CHECKING:
    from naiad.backend import Tensor as CoreTensor

_KDL_CPU = 1


class Tensor:
    """Input or output data of a request: ``Tensor(name, numpy_array)``."""

    __slots__ = ("_array", "_bytes", "_core", "_dtype", "_name")

    def __init__(self, name: str, numpy_array: npt.ArrayLike) -> None:
        if numpy_array is None:  # refused before the name, as in Triton
            raise TypeError("Tensor(): the data must be a numpy array, not None")
        name = _tensor_name(name, "Tensor()")
        array = numpy_array if isinstance(numpy_array, np.ndarray) else np.asarray(numpy_array)
        if array.dtype.kind in "biuf" and not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        dtype = numpy_to_triton_type(array.dtype.type)
        if dtype is None:
            raise TritonModelException(
                f"NumPy dtype is not supported. Tensor '{name}' has dtype '{array.dtype}'; use "
                "dtype=np.object_ (or np.bytes_) for strings and bytes"
            )
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = name
        self._array: npt.NDArray[Any] = array
        self._dtype = dtype
        self._bytes: npt.NDArray[np.object_] | None = _capture_bytes(array) if dtype == BYTES else None
        self._core: CoreTensor | None = None

    @classmethod
    def _wrap(cls, name: str, array: npt.NDArray[Any], dtype: int, core: CoreTensor | None = None) -> Tensor:
        """A tensor over an already-validated array (DLPack imports), or over ``core``'s data."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array
        tensor._dtype = dtype
        tensor._bytes = array if dtype == BYTES else None
        tensor._core = core
        return tensor

    @staticmethod
    def from_dlpack(name: str, capsule: object) -> Tensor:
        """A tensor sharing memory with a DLPack capsule or ``__dlpack__`` object (CPU, C order).

        This is the only way to build BF16 tensors.
        """
        name = _tensor_name(name, "Tensor.from_dlpack()")
        array, bf16 = dlpack.from_dlpack(capsule)
        if bf16:
            return Tensor._wrap(name, array, BF16)
        dtype = numpy_to_triton_type(array.dtype)
        if dtype is None or dtype == BYTES:
            raise TritonModelException(
                f"DLPack tensor '{name}' has dtype '{array.dtype}', which has no Triton datatype"
            )
        return Tensor._wrap(name, array, dtype)

    def name(self) -> str:
        """The tensor name."""
        return self._name

    def triton_dtype(self) -> int:
        """The Triton datatype number (``TYPE_FP32`` is 11, BYTES 13, BF16 14)."""
        return self._dtype

    def shape(self) -> list[int]:
        """The full shape, batch dimension included."""
        return [int(dim) for dim in self._array.shape]

    def is_cpu(self) -> bool:
        """Always true: naiad keeps tensors in host memory."""
        return True

    def as_numpy(self) -> npt.NDArray[Any]:
        """The data as a numpy array; BYTES tensors give an ``np.object_`` array of ``bytes``."""
        if self._dtype == BF16:
            raise TritonModelException(  # Triton's words, which its own tests check for
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead."
            )
        return self._array

    def to_dlpack(self) -> object:
        """A DLPack capsule sharing this tensor's memory (not for BYTES tensors)."""
        return self._export()

    def __dlpack__(self, stream: object = None, **kwargs: Any) -> object:
        """DLPack protocol export; ``stream`` must be ``None`` for host memory."""
        return self._export(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``."""
        return (_KDL_CPU, 0)

    def _export(self, **kwargs: Any) -> object:
        if self._dtype == BYTES:
            raise TritonModelException("DLPack does not have support for string tensors.")
        return dlpack.to_dlpack(self._array, bf16=self._dtype == BF16, **kwargs)

    def _wire_array(self) -> npt.NDArray[Any]:
        """The data as naiad sends it: BYTES as object arrays of bytes, BF16 as uint16."""
        return self._bytes if self._bytes is not None else self._array

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, dtype={self._dtype}, shape={self.shape()})"


def _capture_bytes(array: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """A private object array of ``bytes``, encoded like ``serialize_byte_tensor`` does.

    ``bytes`` (and ``np.bytes_``) elements are kept, anything else becomes ``str(x)`` in UTF-8.
    """
    out = np.empty(array.shape, dtype=np.object_)
    for index, item in enumerate(array.flat):
        out.flat[index] = bytes(item) if isinstance(item, bytes) else str(item).encode("utf-8")
    return out


def _tensor_name(name: object, where: str) -> str:
    """A tensor's name as text (``bytes`` too, as in Triton); an empty one is refused in Triton's words."""
    checked = text(name, f"{where}: the name")
    if checked == "":
        raise TritonModelException("Tensor name cannot be an empty string.")
    return checked
