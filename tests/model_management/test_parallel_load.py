"""--model-load-thread-count: independent models load in parallel (two 1 s loads take about 1 s),
one at a time with a count of 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess

SLOW_LOAD = """
import json
import time


class TritonPythonModel:
    def initialize(self, args):
        started = time.monotonic()
        time.sleep(1.0)
        with open({log!r}, "a") as log:
            log.write(json.dumps([started, time.monotonic()]) + "\\n")

    def execute(self, requests):
        return []
"""

CONFIG = """
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


@pytest.mark.parametrize(("flags", "parallel"), [((), True), (("--model-load-thread-count=1",), False)])
def test_independent_models_load_in_parallel(
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
    tmp_path: Path,
    flags: tuple[str, ...],
    parallel: bool,
) -> None:
    log = tmp_path / "loads.jsonl"
    for name in ("slow_a", "slow_b"):
        model_repository.add_python_model(name, SLOW_LOAD.format(log=str(log)), CONFIG)
    naiad_server(model_repository.root, args=flags)
    loads = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(loads) == 2
    span = max(end for _, end in loads) - min(start for start, _ in loads)
    if parallel:
        assert span < 1.7, f"two 1 s loads took {span:.2f} s together"
    else:
        assert span >= 2.0, f"two 1 s loads with one loader thread took only {span:.2f} s"
