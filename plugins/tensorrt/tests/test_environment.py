"""What a TensorRT model needs from the host, and the messages when it is missing, on this machine."""

from __future__ import annotations

import importlib.util

import pytest

from naiad.backend import ErrorCode, NaiadError, gpu_count
from naiad_tensorrt.environment import import_cuda_runtime, import_tensorrt, require_gpu


def test_require_gpu() -> None:
    if gpu_count() > 0:
        require_gpu("m", "1/model.plan")
        return
    with pytest.raises(NaiadError) as caught:
        require_gpu("m", "1/model.plan")
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert caught.value.message.startswith("model 'm': no GPU found (no CUDA device is visible to this process)")


def test_tensorrt_and_cuda_python_are_imported_or_named_with_their_install_command() -> None:
    for importer, module, name in (
        (import_tensorrt, "tensorrt", "TensorRT's Python package"),
        (import_cuda_runtime, "cuda.bindings", "cuda-python's CUDA runtime bindings"),
    ):
        installed = importlib.util.find_spec(module.split(".")[0]) is not None and (
            module == "tensorrt" or importlib.util.find_spec(module) is not None
        )
        if installed:
            assert importer("model 'm'") is not None
            continue
        with pytest.raises(NaiadError) as caught:
            importer("model 'm'")
        assert caught.value.code is ErrorCode.UNAVAILABLE
        assert caught.value.message.startswith(f"model 'm' needs {name}, which")
        assert "On the GPU machine run: pip install 'naiad-tensorrt[gpu]'" in caught.value.message
