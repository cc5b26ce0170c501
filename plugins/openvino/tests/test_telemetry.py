"""Loading a model imports OpenVINO with its usage telemetry off: nothing is sent, no process is forked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from naiad.testing import ModelRepositoryBuilder

from .conftest import Sources, place

# A fresh interpreter, so that no earlier ``import openvino`` (the test models are built with it) counts.
LOAD_AND_REPORT = """
import os
import sys
from pathlib import Path

from naiad.testing import load_model

forks = []
os.register_at_fork(before=lambda: forks.append(1))
model = load_model(Path(sys.argv[1]))
import openvino.tools.ovc.telemetry_utils as converter_telemetry

model.close()
print(sys.modules["openvino_telemetry"], converter_telemetry.tm.__name__, len(forks))
"""


def test_a_model_load_imports_openvino_without_its_telemetry(sources: Sources, tmp_path: Path) -> None:
    model_dir = place(ModelRepositoryBuilder(tmp_path), "add_mul", None, sources.add_mul_xml)
    ran = subprocess.run(
        [sys.executable, "-c", LOAD_AND_REPORT, str(model_dir)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    # OpenVINO's converter falls back to its no-op stub; no telemetry process was forked.
    assert ran.stdout.split() == ["None", "openvino.tools.ovc.telemetry_stub", "0"]
