"""A TensorRT engine described in model-config terms, with no TensorRT import.

The GPU code fills an :class:`EngineDescription` from a deserialized ``trt.ICudaEngine``
(:mod:`naiad_tensorrt.engine`); auto-complete, the config checks, profile choice and CUDA-graph
planning read only this description, so they run and are tested on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# TensorRT ``DataType`` member name -> Triton config datatype (Triton's ConvertTrtTypeToConfigDataType).
TRT_TO_CONFIG: dict[str, str] = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
    "UINT8": "TYPE_UINT8",
}
INVALID = "TYPE_INVALID"


@dataclass(frozen=True, slots=True)
class ProfileShape:
    """The smallest, optimal and largest shape one optimization profile accepts for one input."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def accepts(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.max) and all(
            low <= dim <= high for low, dim, high in zip(self.min, shape, self.max, strict=True)
        )

    def distance(self, shape: Sequence[int]) -> int:
        """Manhattan distance from the optimal shape (Triton picks the profile where this is smallest)."""
        return sum(abs(best - dim) for best, dim in zip(self.opt, shape, strict=True))


@dataclass(frozen=True, slots=True)
class EngineTensor:
    """One I/O tensor: name, TensorRT datatype name, shape (-1 = dynamic) and its kind."""

    name: str
    is_input: bool
    trt_type: str
    shape: tuple[int, ...]
    is_shape_tensor: bool = False
    linear_format: bool = True

    @property
    def config_type(self) -> str:
        """The config datatype (``TYPE_FP32``), or ``TYPE_INVALID`` for TensorRT types Triton cannot serve."""
        return TRT_TO_CONFIG.get(self.trt_type, INVALID)

    @property
    def dynamic(self) -> bool:
        return any(dim < 0 for dim in self.shape)


@dataclass(frozen=True, slots=True)
class EngineDescription:
    """An engine's I/O tensors (in the engine's order) and, per optimization profile, each input's shapes."""

    tensors: tuple[EngineTensor, ...]
    profiles: tuple[Mapping[str, ProfileShape], ...] = field(default_factory=tuple)
    implicit_batch: bool = False

    @property
    def inputs(self) -> tuple[EngineTensor, ...]:
        return tuple(t for t in self.tensors if t.is_input)

    @property
    def outputs(self) -> tuple[EngineTensor, ...]:
        return tuple(t for t in self.tensors if not t.is_input)

    def input(self, name: str) -> EngineTensor | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> EngineTensor | None:
        return next((t for t in self.outputs if t.name == name), None)

    def profile_shape(self, profile: int, name: str) -> ProfileShape:
        """Input ``name``'s shapes in ``profile``; an input the profile does not list is fixed at its shape."""
        shapes = self.profiles[profile] if profile < len(self.profiles) else {}
        if name in shapes:
            return shapes[name]
        tensor = self.input(name)
        fixed = tensor.shape if tensor else ()
        return ProfileShape(fixed, fixed, fixed)


def shape_text(dims: Sequence[int]) -> str:
    """Triton's shape rendering: ``[-1,3]``."""
    return "[" + ",".join(str(dim) for dim in dims) + "]"
