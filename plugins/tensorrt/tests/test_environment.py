"""What a TensorRT model needs from the host, and the messages when it is missing, on this machine."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

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


@pytest.mark.parametrize(
    ("importer", "module", "name"),
    [
        (import_tensorrt, "tensorrt", "TensorRT's Python package"),
        (import_cuda_runtime, "cuda.bindings.runtime", "cuda-python's CUDA runtime bindings (cuda.bindings)"),
    ],
)
def test_a_missing_gpu_library_is_named_with_its_install_command(
    importer: Callable[[str], ModuleType], module: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # unimportable, whether or not this machine has it
    with pytest.raises(NaiadError) as caught:
        importer("model 'm'")
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert caught.value.message.startswith(f"model 'm' needs {name}, which")
    assert "not installed" in caught.value.message
    assert "On the GPU machine run: pip install 'naiad-tensorrt[gpu]'" in caught.value.message
