"""What an ONNX Runtime session says about its inputs and outputs, in model-config terms.

ONNX Runtime describes a tensor as a type string (``tensor(float)``) and a shape whose symbolic or
unknown dimensions are strings or ``None``; here those become Triton config datatypes
(``TYPE_FP32``) and ``-1``, as Triton's onnxruntime backend reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from naiad.backend import ErrorCode, NaiadError

# ONNX tensor element type (as ONNX Runtime's Python API spells it) -> Triton config datatype.
ONNX_TO_CONFIG: dict[str, str] = {
    "bool": "TYPE_BOOL",
    "uint8": "TYPE_UINT8",
    "uint16": "TYPE_UINT16",
    "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64",
    "int8": "TYPE_INT8",
    "int16": "TYPE_INT16",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "float16": "TYPE_FP16",
    "float": "TYPE_FP32",
    "double": "TYPE_FP64",
    "string": "TYPE_STRING",
}

INVALID = "TYPE_INVALID"

# Triton's names for the ONNX kinds of value that are not tensors.
_ONNX_KINDS = {"seq": "ONNX_TYPE_SEQUENCE", "map": "ONNX_TYPE_MAP", "optional": "ONNX_TYPE_OPTIONAL"}


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One model input or output: name, ONNX element type, config datatype and shape (-1 = variable)."""

    name: str
    element_type: str
    dims: tuple[int, ...]

    @property
    def config_type(self) -> str:
        """The config datatype (``TYPE_FP32``), or ``TYPE_INVALID`` for types Triton cannot serve."""
        return ONNX_TO_CONFIG.get(self.element_type, INVALID)


@dataclass(frozen=True, slots=True)
class ModelIO:
    """A session's inputs, outputs and overridable initializers, in the session's order."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    initializers: tuple[TensorInfo, ...] = ()

    def input(self, name: str) -> TensorInfo | None:
        """The input or overridable initializer called ``name``."""
        return next((t for t in (*self.inputs, *self.initializers) if t.name == name), None)

    def output(self, name: str) -> TensorInfo | None:
        return next((t for t in self.outputs if t.name == name), None)


def read_io(session: Any) -> ModelIO:
    """Describe an ``onnxruntime.InferenceSession``; UNSUPPORTED for inputs/outputs that are not tensors."""
    return ModelIO(
        inputs=_infos(session.get_inputs()),
        outputs=_infos(session.get_outputs()),
        initializers=_infos(session.get_overridable_initializers()),
    )


def _infos(args: Sequence[Any]) -> tuple[TensorInfo, ...]:
    return tuple(tensor_info(arg.name, arg.type, arg.shape) for arg in args)


def tensor_info(name: str, onnx_type: str, shape: Sequence[object] | None) -> TensorInfo:
    """A :class:`TensorInfo` from a NodeArg's ``type`` (``tensor(float)``) and ``shape``."""
    kind, _, rest = onnx_type.partition("(")
    if kind != "tensor":
        found = _ONNX_KINDS.get(kind, f"ONNX_TYPE_UNKNOWN ({onnx_type})")
        raise NaiadError(
            f"Unsupported ONNX Type '{found}' for I/O '{name}', expected 'ONNX_TYPE_TENSOR'.",
            ErrorCode.UNSUPPORTED,
        )
    dims = tuple(dim if isinstance(dim, int) and dim >= 0 else -1 for dim in (shape or ()))
    return TensorInfo(name, rest.rstrip(")"), dims)


def shape_text(dims: Sequence[int]) -> str:
    """Triton's shape rendering: ``[-1,3]``."""
    return "[" + ",".join(str(dim) for dim in dims) + "]"
