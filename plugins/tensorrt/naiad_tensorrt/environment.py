"""What a TensorRT model needs from the host: a CUDA device, TensorRT and cuda-python, with the fix when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from naiad.backend import ErrorCode, NaiadError, gpu_count

INSTALL = "pip install 'naiad-tensorrt[gpu]'"


def require_gpu(model: str, model_file: str) -> None:
    """UNAVAILABLE when this process sees no CUDA device (TensorRT plans run only on NVIDIA GPUs)."""
    if gpu_count() == 0:
        raise NaiadError(
            f"model '{model}': no GPU found (no CUDA device is visible to this process); TensorRT plans need one,"
            f" so '{model_file}' cannot load here. Serve this model on a machine with an NVIDIA GPU and driver"
            " (check nvidia-smi and CUDA_VISIBLE_DEVICES); every other model keeps serving",
            ErrorCode.UNAVAILABLE,
        )


def import_tensorrt(what: str) -> ModuleType:
    """The ``tensorrt`` module; UNAVAILABLE naming ``what`` needed it and how to install it."""
    return _import(
        "tensorrt",
        f"{what} needs TensorRT's Python package, which is not installed",
        " (it brings TensorRT 10 and cuda-python)",
    )


def import_cuda_runtime(what: str) -> ModuleType:
    """``cuda.bindings.runtime`` (cuda-python); UNAVAILABLE naming ``what`` needed it and how to install it."""
    return _import(
        "cuda.bindings.runtime",
        f"{what} needs cuda-python's CUDA runtime bindings (cuda.bindings), which are not installed",
    )


def _import(module: str, missing: str, after_install: str = "") -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise NaiadError(
            f"{missing} ({error}). On the GPU machine run: {INSTALL}{after_install}", ErrorCode.UNAVAILABLE
        ) from None
