"""Which CUDA graphs an instance captures, as Triton's tensorrt backend decides.

With ``optimization { cuda { graphs: true } }`` and no ``graph_spec``, graphs are captured for the
batch sizes 1, 2, 3, 4, 6, 8, 12, 16 and ``max_batch_size`` (those not above it); a dynamic or
sequence (``oldest``) batcher with preferred batch sizes gets 1, those sizes and the maximum
instead; a model that does not batch gets one graph (batch size 0). ``graph_spec`` entries name
the batch size and input shapes (without the batch dimension) themselves. naiad runs a graph for a
batch whose shapes equal a captured graph's exactly; ``graph_lower_bound`` is checked as in Triton,
but smaller batches run without a graph rather than padded into one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from naiad.backend import ModelConfig, invalid_arg
from naiad_tensorrt.description import EngineDescription

DEFAULT_BATCH_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """One graph to capture: its batch size (0 when not batching) and input shapes without the batch dim."""

    batch_size: int
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    lower_batch_size: int | None = None
    lower_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def default_batch_sizes(max_batch_size: int, preferred: Sequence[int] = ()) -> list[int]:
    """Triton's default graph batch sizes for a model with ``max_batch_size`` and preferred batch sizes."""
    if max_batch_size == 0:
        return [0]
    sizes = {1, *preferred} if preferred else set(DEFAULT_BATCH_SIZES)
    sizes.add(max_batch_size)
    return sorted(size for size in sizes if size <= max_batch_size)


def graph_specs(config: ModelConfig) -> list[GraphSpec]:
    """The graphs ``config`` asks for (none without ``cuda { graphs: true }``); INVALID_ARG for bad specs."""
    cuda = config.optimization.cuda
    if not cuda.graphs:
        return []
    if not cuda.graph_spec:
        return [GraphSpec(size) for size in default_batch_sizes(config.max_batch_size, _preferred(config))]
    specs = []
    for spec in cuda.graph_spec:
        lower = spec.graph_lower_bound if spec.HasField("graph_lower_bound") else None
        specs.append(
            GraphSpec(
                spec.batch_size,
                {name: tuple(shape.dim) for name, shape in spec.input.items()},
                lower.batch_size if lower is not None else None,
                {name: tuple(shape.dim) for name, shape in lower.input.items()} if lower is not None else {},
            )
        )
    for graph in specs:
        _validate(config, graph)
    return specs


def capture_shapes(
    spec: GraphSpec, engine: EngineDescription, profile: int, batching: bool, inputs: Sequence[str]
) -> dict[str, tuple[int, ...]] | None:
    """Full input shapes to capture ``spec`` with on ``profile``; None when the profile cannot take them.

    Inputs the spec does not name take the profile's optimal shape (its fixed shape when static).
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for name in inputs:
        allowed = engine.profile_shape(profile, name)
        rest = spec.shapes.get(name, allowed.opt[1:] if batching else allowed.opt)
        shape = (spec.batch_size, *rest) if batching else tuple(rest)
        if not allowed.accepts(shape):
            return None
        shapes[name] = shape
    return shapes


def _preferred(config: ModelConfig) -> list[int]:
    if config.HasField("dynamic_batching"):
        return list(config.dynamic_batching.preferred_batch_size)
    if config.HasField("sequence_batching") and config.sequence_batching.HasField("oldest"):
        return list(config.sequence_batching.oldest.preferred_batch_size)
    return []


def _validate(config: ModelConfig, spec: GraphSpec) -> None:
    where = f"model '{config.name}': optimization.cuda.graph_spec"
    lower_batch = spec.batch_size if spec.lower_batch_size is None else spec.lower_batch_size
    lower_shapes = spec.shapes if spec.lower_batch_size is None else spec.lower_shapes
    maximum = config.max_batch_size
    if maximum == 0:
        if spec.batch_size != 0 or lower_batch != 0:
            raise invalid_arg(f"{where}: graph spec expects 'batch_size' to be 0 if 'max_batch_size' is 0")
    elif not (1 <= spec.batch_size <= maximum and 1 <= lower_batch <= maximum):
        raise invalid_arg(f"{where}: graph spec expects 'batch_size' to be >= 1 and <= {maximum}")
    if lower_batch > spec.batch_size:
        raise invalid_arg(f"{where}: graph lower bound spec expects 'batch_size' to be <= graph spec 'batch_size'")
    for name, shape in spec.shapes.items():
        if name not in lower_shapes:
            raise invalid_arg(f"{where}: graph lower bound spec expects shape for input '{name}'")
        lower = lower_shapes[name]
        if len(lower) != len(shape):
            raise invalid_arg(
                f"{where}: graph lower bound spec expects to have '{len(shape)}' dimensions, got {len(lower)}"
            )
        for low, high in zip(lower, shape, strict=True):
            if low < 0 or high < 0:
                raise invalid_arg(f"{where}: graph spec expects input '{name}' to have dimension >= 0")
            if low > high:
                raise invalid_arg(f"{where}: graph lower bound spec expects input '{name}' to have dimension <= {high}")
