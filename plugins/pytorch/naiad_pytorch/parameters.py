"""The ``parameters`` of Triton's PyTorch backend, parsed from the model config (no torch import).

Names, defaults and value syntax follow Triton's ``pytorch_backend``: booleans accept
``true``/``false``, ``on``/``off``, ``1``/``0`` (any case); thread counts are integers and
take effect only when positive. Unknown parameters are ignored, as in Triton.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from naiad.backend import ModelParameter, invalid_arg

_TRUE = frozenset({"true", "on", "1"})
_FALSE = frozenset({"false", "off", "0"})

# Triton parameters that no longer have an effect with the PyTorch versions naiad supports.
OBSOLETE = {
    "ENABLE_NVFUSER": "NvFuser was removed from TorchScript (PyTorch 2.2); the default fuser is used",
}


@dataclass(frozen=True, slots=True)
class TorchParameters:
    """What a model's ``parameters`` ask of the backend; ``None`` means "leave torch's setting alone"."""

    optimized_execution: bool = True  # DISABLE_OPTIMIZED_EXECUTION
    inference_mode: bool = True  # INFERENCE_MODE (Triton's default is true since 23.x)
    cudnn: bool = True  # DISABLE_CUDNN
    cache_cleaning: bool = False  # ENABLE_CACHE_CLEANING
    weight_sharing: bool = False  # ENABLE_WEIGHT_SHARING
    tensor_fuser: bool | None = None  # ENABLE_TENSOR_FUSER
    jit_profiling: bool | None = None  # ENABLE_JIT_PROFILING
    jit_executor: bool | None = None  # ENABLE_JIT_EXECUTOR
    intra_op_threads: int | None = None  # INTRA_OP_THREAD_COUNT
    inter_op_threads: int | None = None  # INTER_OP_THREAD_COUNT


def parse_parameters(model_name: str, parameters: Mapping[str, ModelParameter]) -> TorchParameters:
    """Read the PyTorch backend parameters; INVALID_ARG naming the parameter for a bad value."""
    values = {key: parameter.string_value for key, parameter in parameters.items()}

    def flag(key: str) -> bool | None:
        if key not in values:
            return None
        text = values[key].strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise invalid_arg(
            f"model '{model_name}': parameter '{key}': failed to convert '{values[key]}' to boolean"
            " (use true/false, on/off or 1/0)"
        )

    def count(key: str) -> int | None:
        if key not in values:
            return None
        number = parse_integer(model_name, key, values[key])
        return number if number > 0 else None

    def default(value: bool | None, fallback: bool) -> bool:
        return fallback if value is None else value

    disable_optimized = flag("DISABLE_OPTIMIZED_EXECUTION")
    disable_cudnn = flag("DISABLE_CUDNN")
    return TorchParameters(
        optimized_execution=not default(disable_optimized, False),
        inference_mode=default(flag("INFERENCE_MODE"), True),
        cudnn=not default(disable_cudnn, False),
        cache_cleaning=default(flag("ENABLE_CACHE_CLEANING"), False),
        weight_sharing=default(flag("ENABLE_WEIGHT_SHARING"), False),
        tensor_fuser=flag("ENABLE_TENSOR_FUSER"),
        jit_profiling=flag("ENABLE_JIT_PROFILING"),
        jit_executor=flag("ENABLE_JIT_EXECUTOR"),
        intra_op_threads=count("INTRA_OP_THREAD_COUNT"),
        inter_op_threads=count("INTER_OP_THREAD_COUNT"),
    )


def parse_integer(model_name: str, key: str, text: str) -> int:
    """An integer parameter; INVALID_ARG naming the model and parameter otherwise."""
    try:
        return int(text.strip())
    except ValueError:
        raise invalid_arg(
            f"model '{model_name}': parameter '{key}': failed to convert '{text}' to integral number"
        ) from None


def setting_lines(model_name: str, parameters: TorchParameters, given: Collection[str]) -> list[str]:
    """What Triton's backend logs at load of a model that has ``parameters`` (``given`` are their keys):
    the four switches always, the optional ones when given, in Triton's words and order."""
    where = f"for model instance '{model_name}'"

    def state(enabled: bool | None) -> str:
        return "enabled" if enabled else "disabled"

    lines = [
        f"Optimized execution is {state(parameters.optimized_execution)} {where}",
        f"Cache Cleaning is {state(parameters.cache_cleaning)} {where}",
        f"Inference Mode is {state(parameters.inference_mode)} {where}",
        f"cuDNN is {state(parameters.cudnn)} {where}",
    ]
    optional = (
        ("ENABLE_TENSOR_FUSER", "Tensor fuser", parameters.tensor_fuser),
        ("ENABLE_WEIGHT_SHARING", "Weight sharing", parameters.weight_sharing),
        ("ENABLE_JIT_PROFILING", "Jit profiling", parameters.jit_profiling),
        ("ENABLE_JIT_EXECUTOR", "Jit executor", parameters.jit_executor),
    )
    lines += [f"{label} is {state(value)} {where}" for key, label, value in optional if key in given]
    return lines
