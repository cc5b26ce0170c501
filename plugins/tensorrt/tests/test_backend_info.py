"""What the backend tells naiad before any model loads, and that this needs neither TensorRT nor a GPU."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from naiad.backend import Capabilities, ModelFormat, OnDisk
from naiad_tensorrt import naiad_backend_info


def test_backend_info_is_tritons_tensorrt_entry() -> None:
    info = naiad_backend_info()
    assert info.name == "tensorrt"
    assert info.formats == (ModelFormat("model.plan", ("tensorrt_plan",), OnDisk.FILE),)
    assert info.checks_platform
    assert info.capabilities == Capabilities(optimization_profiles=True)
    assert info.default_instance_kind is None  # KIND_AUTO: a GPU when there is one


def test_the_entry_point_is_registered() -> None:
    found = [entry for entry in entry_points(group="naiad.backends") if entry.name == "tensorrt"]
    assert [entry.value for entry in found] == ["naiad_tensorrt"]


def test_the_hooks_and_the_pure_rules_import_without_tensorrt_or_cuda() -> None:
    code = (
        "import sys, naiad_tensorrt as b, naiad_tensorrt.model, naiad_tensorrt.build; b.naiad_backend_info();"
        " sys.exit(any(name in sys.modules for name in ('tensorrt', 'cuda.bindings.runtime')))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
