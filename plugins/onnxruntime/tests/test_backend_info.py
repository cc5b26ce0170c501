"""What the backend tells naiad before any model loads: Triton's facts for onnxruntime."""

from __future__ import annotations

import subprocess
import sys

from naiad.backend import ModelFormat
from naiad_onnxruntime import naiad_backend_info


def test_backend_info_is_tritons_onnxruntime_entry() -> None:
    info = naiad_backend_info()
    assert info.name == "onnxruntime"
    assert info.formats == (ModelFormat("model.onnx", ("onnxruntime_onnx",)),)
    assert info.checks_platform
    assert not info.platform_required
    assert info.default_instance_kind is None  # Triton's KIND_AUTO rule
    assert info.default_cpu_instance_count == 2


def test_reading_the_backend_info_does_not_import_onnxruntime() -> None:
    code = "import sys, naiad_onnxruntime as b; b.naiad_backend_info(); sys.exit('onnxruntime' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
