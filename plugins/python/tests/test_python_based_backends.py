"""Triton's python-based backends: ``<--backend-directory>/<name>/model.py`` serves every model whose
config says ``backend: "<name>"``, each with files of its own (here, ``model.json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ServerProcess, start_server

# The backend: each model's 1/model.json names its operation; the arithmetic is in a module beside it.
BACKEND = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from arithmetic import apply


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for name in ("INPUT0", "INPUT1"):
            config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "MODEL_DIR", "data_type": "TYPE_STRING", "dims": [1]})
        return config

    def initialize(self, args):
        self.model_dir = pb_utils.get_model_dir()
        with open(os.path.join(self.model_dir, "model.json")) as settings:
            self.operation = json.load(settings)["operation"]
        self.repository = args["model_repository"]

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            where = f"{self.model_dir}|{self.repository}"
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", apply(self.operation, a, b)),
                pb_utils.Tensor("MODEL_DIR", np.array([where.encode()], dtype=np.object_)),
            ]))
        return responses
"""

ARITHMETIC = """
def apply(operation, a, b):
    return a + b if operation == "add" else a - b
"""


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("python_based")
    backends, models = root / "backends", root / "models"
    (backends / "add_sub").mkdir(parents=True)
    (backends / "add_sub" / "model.py").write_text(BACKEND)
    (backends / "add_sub" / "arithmetic.py").write_text(ARITHMETIC)
    (backends / "not_python").mkdir()  # a folder without a model.py serves nothing
    for name, operation, versions in (("add", "add", (1, 2)), ("sub", "sub", (1,))):
        (models / name).mkdir(parents=True)
        (models / name / "config.pbtxt").write_text('backend: "add_sub"\nversion_policy: { all {} }\n')
        for version in versions:
            (models / name / str(version)).mkdir()
            (models / name / str(version) / "model.json").write_text(json.dumps({"operation": operation}))
    for name in ("not_python", "nowhere"):
        (models / name / "1").mkdir(parents=True)
        (models / name / "config.pbtxt").write_text(f'backend: "{name}"\n')
    return backends, models


@pytest.fixture(scope="module")
def server(layout: tuple[Path, Path]) -> Iterator[ServerProcess]:
    backends, models = layout
    process = start_server([models], f"--backend-directory={backends}")
    yield process
    process.stop()


def _infer(
    client: httpclient.InferenceServerClient | grpcclient.InferenceServerClient, model: str, version: str
) -> tuple[np.ndarray, str]:
    module = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    inputs = []
    for name, value in (("INPUT0", 5.0), ("INPUT1", 2.0)):
        tensor = module.InferInput(name, [4], "FP32")
        tensor.set_data_from_numpy(np.full(4, value, dtype=np.float32))
        inputs.append(tensor)
    result = client.infer(model, inputs, model_version=version)
    return result.as_numpy("OUTPUT"), result.as_numpy("MODEL_DIR")[0].decode()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_every_model_naming_the_backend_runs_its_model_py_with_its_own_files(
    server: ServerProcess, layout: tuple[Path, Path], protocol: str
) -> None:
    _, models = layout
    client = (
        httpclient.InferenceServerClient(server.http_url)
        if protocol == "http"
        else grpcclient.InferenceServerClient(server.grpc_url)
    )
    for model, version, expected in (("add", "1", 7.0), ("add", "2", 7.0), ("sub", "1", 3.0)):
        output, where = _infer(client, model, version)
        np.testing.assert_array_equal(output, np.full(4, expected, dtype=np.float32))
        # get_model_dir() is the model's version folder, args["model_repository"] its folder, as in Triton
        assert where == f"{models / model / version}|{models / model}"


def test_the_config_is_auto_completed_by_the_backend_and_records_its_runtime(server: ServerProcess) -> None:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("add")
    assert config["backend"] == "add_sub"
    assert config["runtime"] == "model.py"
    assert [tensor["name"] for tensor in config["input"]] == ["INPUT0", "INPUT1"]
    assert "backend 'add_sub' is served from" in server.logs()


def test_a_backend_with_no_model_py_fails_its_models_naming_where_it_looked(
    server: ServerProcess, layout: tuple[Path, Path]
) -> None:
    backends, _ = layout
    index = {
        entry["name"]: entry for entry in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    }
    for name in ("not_python", "nowhere"):
        assert index[name]["state"] == "UNAVAILABLE"
        assert (
            f"no installed distribution provides backend '{name}' (entry-point group 'naiad.backends') nor "
            f"{backends / name}/model.py" in index[name]["reason"]
        )
    assert index["add"]["state"] == "READY"


def test_naiad_check_finds_the_backend_in_the_same_directory(layout: tuple[Path, Path], tmp_path: Path) -> None:
    backends, models = layout
    clean = tmp_path / "models"
    for name in ("add", "sub"):
        (clean / name).mkdir(parents=True)
        (clean / name / "config.pbtxt").write_text((models / name / "config.pbtxt").read_text())
        for version in (models / name).iterdir():
            if version.is_dir():
                (clean / name / version.name).mkdir()
                (clean / name / version.name / "model.json").write_text((version / "model.json").read_text())
    command = [sys.executable, "-m", "naiad", "check", str(clean)]
    found = subprocess.run([*command, f"--backend-directory={backends}"], capture_output=True, text=True, check=False)
    assert (found.returncode, found.stdout.strip()) == (0, "2 models checked: no problems")
    missing = subprocess.run(command, capture_output=True, text=True, check=False)
    assert missing.returncode == 1
    assert "no installed distribution provides backend 'add_sub'" in missing.stdout
