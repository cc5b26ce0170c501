"""The tutorial backend of docs/writing-a-backend.md, exactly as written there: built, pip-installed into a
temp dir, discovered through its entry point and served by a real server process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-a-backend.md"

SHAPE = """
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


def _doc_files() -> dict[str, str]:
    """The code blocks of the tutorial whose first line names a file (``# naiad_scale/__init__.py``)."""
    blocks = re.findall(r"```\w*\n# (\S+)\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return {path: body for path, body in blocks if path in ("pyproject.toml", "naiad_scale/__init__.py")}


@pytest.fixture(scope="module")
def installed_backend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``naiad-scale`` built from the tutorial's code in a temp dir and installed into another."""
    files = _doc_files()
    assert sorted(files) == ["naiad_scale/__init__.py", "pyproject.toml"]
    source = tmp_path_factory.mktemp("naiad-scale-src")
    for relative, body in files.items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(body)
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


def test_the_tutorial_backend_is_discovered_and_serves(
    installed_backend: Path,
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
) -> None:
    factor = 'parameters { key: "FACTOR" value: { string_value: "3" } }'
    model_repository.add_model("tripler", f'platform: "scale_factor"\n{SHAPE}{factor}', {"1/.keep": ""})
    model_repository.add_model("doubler", SHAPE, {"1/factor.txt": "2"})  # found by its model file
    path = os.pathsep.join([str(installed_backend), os.environ.get("PYTHONPATH", "")])
    server = naiad_server(model_repository.root, env={"PYTHONPATH": path})
    data = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)

    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("X", [2, 3], "FP32")
    tensor.set_data_from_numpy(data)
    np.testing.assert_array_equal(client.infer("tripler", [tensor]).as_numpy("Y"), data * 3)
    grpc_tensor = grpcclient.InferInput("X", [2, 3], "FP32")
    grpc_tensor.set_data_from_numpy(data)
    doubled = grpcclient.InferenceServerClient(server.grpc_url).infer("doubler", [grpc_tensor])
    np.testing.assert_array_equal(doubled.as_numpy("Y"), data * 2)

    assert client.get_model_metadata("tripler")["platform"] == "scale_factor"
    config = client.get_model_config("doubler")
    assert (config["backend"], config["platform"], config["default_model_filename"]) == (
        "scale",
        "scale_factor",
        "factor.txt",
    )
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics") as response:
        metrics = response.read().decode()
    assert 'scale_requests{model="tripler"} 1\n' in metrics
    assert 'scale_requests{model="doubler"} 1\n' in metrics
    stats = client.get_inference_statistics("tripler")["model_stats"][0]["inference_stats"]
    assert int(stats["compute_input"]["ns"]) > 0  # the execution report splits the phases
    assert int(stats["compute_output"]["ns"]) > 0


def test_a_model_without_a_factor_fails_with_the_tutorials_message(
    installed_backend: Path,
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
) -> None:
    model_repository.add_model("nothing", f'platform: "scale_factor"\n{SHAPE}', {"1/.keep": ""})
    path = os.pathsep.join([str(installed_backend), os.environ.get("PYTHONPATH", "")])
    server = naiad_server(model_repository.root, env={"PYTHONPATH": path})
    index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    (entry,) = index
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] == (
        f"model 'nothing': give the factor as config parameter FACTOR or in "
        f"{model_repository.root / 'nothing' / '1' / 'factor.txt'}"
    )
