"""Engine descriptions the tests build by hand, shaped like what ``engine.describe`` reads from real plans."""

from __future__ import annotations

from naiad.backend import ModelConfig, parse_model_config
from naiad_tensorrt.description import EngineDescription, EngineTensor, ProfileShape


def add_sub(
    profiles: tuple[tuple[int, int, int], ...] = ((1, 8, 16), (16, 32, 64)), width: int = 4
) -> EngineDescription:
    """Triton's add/sub on FP32 ``[-1, width]``: one profile per (min, opt, max) batch range."""
    tensors = (
        EngineTensor("INPUT0", True, "FLOAT", (-1, width)),
        EngineTensor("INPUT1", True, "FLOAT", (-1, width)),
        EngineTensor("OUTPUT0", False, "FLOAT", (-1, width)),
        EngineTensor("OUTPUT1", False, "FLOAT", (-1, width)),
    )
    shapes = tuple(
        {name: ProfileShape((low, width), (best, width), (high, width)) for name in ("INPUT0", "INPUT1")}
        for low, best, high in profiles
    )
    return EngineDescription(tensors, shapes)


def static_image() -> EngineDescription:
    """A fixed-shape engine: FP16 ``[1, 3, 8, 8]`` in, INT32 ``[1, 10]`` out, one profile with no ranges."""
    tensors = (
        EngineTensor("image", True, "HALF", (1, 3, 8, 8)),
        EngineTensor("scores", False, "INT32", (1, 10)),
    )
    return EngineDescription(tensors, ({},))


def variable_length() -> EngineDescription:
    """INT64 tokens ``[-1, -1]`` (batch, sequence) -> FP32 ``[-1, -1, 16]``; sequence 1 to 128 in one profile."""
    tensors = (
        EngineTensor("tokens", True, "INT64", (-1, -1)),
        EngineTensor("hidden", False, "FLOAT", (-1, -1, 16)),
    )
    return EngineDescription(tensors, ({"tokens": ProfileShape((1, 1), (4, 64), (8, 128))},))


def config(text: str = "", name: str = "m") -> ModelConfig:
    result = parse_model_config(text, model_name=name)
    result.name = name
    return result
