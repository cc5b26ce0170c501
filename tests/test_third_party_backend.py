"""A backend written outside this repository: built, pip-installed into a temp dir, discovered, served."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess

PYPROJECT = """
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "naiad-scale"
version = "0.0.1"
dependencies = ["naiad", "numpy"]

[project.entry-points."naiad.backends"]
scale = "naiad_scale"
"""

PLUGIN = '''
"""Multiplies every input by the config parameter FACTOR."""

from collections.abc import Sequence

import naiad
from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext
from naiad.backend import InferenceRequest, InferenceResponse, Tensor


class ScaleModel(BackendModel):
    def __init__(self, factor: float) -> None:
        self.factor = factor


class ScaleInstance(ModelInstance):
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            source = request.inputs["X"]
            out = Tensor("Y", source.datatype, source.data * self.factor)
            request.sender.send(InferenceResponse(outputs=[out]), final=True)


@naiad.hookimpl
def naiad_load_model(context: ModelLoadContext) -> ScaleModel:
    return ScaleModel(float(context.config.parameters["FACTOR"].string_value))


@naiad.hookimpl
def naiad_create_instance(model: ScaleModel, context: InstanceContext) -> ModelInstance:
    return ScaleInstance(model.factor)
'''


@pytest.fixture(scope="module")
def installed_backend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``naiad-scale`` built from source in a temp dir and installed into another temp dir."""
    source = tmp_path_factory.mktemp("naiad-scale-src")
    (source / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (source / "naiad_scale").mkdir()
    (source / "naiad_scale" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
    )
    return target


def test_third_party_backend_is_discovered_and_serves(
    installed_backend: Path,
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
) -> None:
    model_repository.add_model(
        "tripler",
        """
        backend: "scale"
        max_batch_size: 4
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
        parameters { key: "FACTOR" value: { string_value: "3" } }
        """,
        {"1/.keep": ""},
    )
    path = os.pathsep.join([str(installed_backend), os.environ.get("PYTHONPATH", "")])
    server = naiad_server(model_repository.root, env={"PYTHONPATH": path})
    client = httpclient.InferenceServerClient(server.http_url)
    data = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    tensor = httpclient.InferInput("X", [2, 3], "FP32")
    tensor.set_data_from_numpy(data)
    np.testing.assert_array_equal(client.infer("tripler", [tensor]).as_numpy("Y"), data * 3)
    assert client.get_model_metadata("tripler")["platform"] == "scale"
