"""``naiad_backend_info``: Triton's pytorch entry, read without importing torch, and what naiad does with it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import naiad_pytorch
from naiad.backend import ModelFormat, NaiadError, OnDisk
from naiad.testing import ModelRepositoryBuilder

from .conftest import LoadModel
from .models import TORCHSCRIPT_DEPRECATION, AddSub, add_torch_model, scripted

pytestmark = TORCHSCRIPT_DEPRECATION

CONFIG = """
input [
  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""


def test_info_is_tritons_pytorch_entry() -> None:
    info = naiad_pytorch.naiad_backend_info()
    assert info.name == "pytorch"
    assert info.formats == (
        ModelFormat("model.pt", ("pytorch_libtorch", "libtorch"), OnDisk.FILE),
        ModelFormat("model.pt2", ("torch_aoti",)),
    )
    assert info.checks_platform
    assert not info.platform_required
    assert (info.default_instance_kind, info.default_cpu_instance_count) == (None, 1)


def test_hook_module_does_not_import_torch() -> None:
    code = "import sys, naiad_pytorch; naiad_pytorch.naiad_backend_info(); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_platform_alias_and_default_file_come_from_the_info(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    add_torch_model(model_repository, "alias", scripted(AddSub()), 'platform: "libtorch"' + CONFIG)
    config = load("alias").config
    assert (config.backend, config.platform, config.default_model_filename) == ("pytorch", "libtorch", "model.pt")
    add_torch_model(model_repository, "detected", scripted(AddSub()), CONFIG)
    config = load("detected").config
    assert (config.backend, config.platform, config.default_model_filename) == (
        "pytorch",
        "pytorch_libtorch",
        "model.pt",
    )


def test_other_platforms_are_refused(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = 'backend: "pytorch" platform: "tensorrt_plan"' + CONFIG
    add_torch_model(model_repository, "wrong", scripted(AddSub()), config)
    with pytest.raises(NaiadError) as caught:
        load("wrong")
    assert "backend 'pytorch' takes platform 'libtorch' or 'pytorch_libtorch' or 'torch_aoti'" in caught.value.message
