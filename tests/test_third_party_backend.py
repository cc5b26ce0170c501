"""The tutorial backend of docs/writing-a-backend.md, exactly as written there: built, pip-installed into a
temp dir, discovered through its entry point and served by a real server process; and the page's install
and serve commands, run as written in a fresh virtual environment."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "writing-a-backend.md"
CHECKOUT_PLACEHOLDER = "path/to/naiad"

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
    with contextlib.closing(grpcclient.InferenceServerClient(server.grpc_url)) as grpc_client:
        doubled = grpc_client.infer("doubler", [grpc_tensor])
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
    client.close()
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
    with contextlib.closing(httpclient.InferenceServerClient(server.http_url)) as index_client:
        index = index_client.get_model_repository_index()
    (entry,) = index
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] == (
        f"Invalid argument: model 'nothing': give the factor as config parameter FACTOR or in "
        f"{model_repository.root / 'nothing' / '1' / 'factor.txt'}"
    )


def _doc_commands() -> tuple[list[str], list[str], list[str]]:
    """The page's shell block split at ``naiad serve``: the setup lines, the serve command, the curl commands."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if CHECKOUT_PLACEHOLDER in block]
    lines = block.replace("\\\n", "").splitlines()
    serve = next(index for index, line in enumerate(lines) if line.startswith("naiad serve"))
    return lines[:serve], shlex.split(lines[serve]), lines[serve + 1 :]


def _doc_tripler_config() -> str:
    """The page's ``models/tripler/config.pbtxt`` listing, unindented."""
    listing = re.search(r"models/tripler/config\.pbtxt\n((?:    .*\n)+)", DOC.read_text())
    assert listing is not None, f"{DOC} lost its models/tripler/config.pbtxt listing"
    return "\n".join(line.removeprefix("    ") for line in listing.group(1).splitlines()) + "\n"


def _checkout_copy(target: Path) -> Path:
    """The naiad checkout without its environment, caches and plugins: pip builds in the folder it is given."""
    skip = shutil.ignore_patterns(".*", "build", "dist", "plugins", "__pycache__", "*.egg-info")
    return Path(shutil.copytree(ROOT, target, ignore=skip))


def test_the_pages_commands_install_and_serve_in_a_fresh_venv(tmp_path: Path) -> None:
    setup, serve, requests = _doc_commands()
    checkout = _checkout_copy(tmp_path / "naiad")
    for relative, body in _doc_files().items():
        (tmp_path / "naiad-scale" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "naiad-scale" / relative).write_text(body)
    ModelRepositoryBuilder(tmp_path / "models").add_model("tripler", _doc_tripler_config(), {"1/.keep": ""})
    script = "\n".join(["set -euo pipefail", *setup]).replace(CHECKOUT_PLACEHOLDER, shlex.quote(str(checkout)))
    clean = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    installed = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=clean, capture_output=True, text=True)
    assert installed.returncode == 0, (
        f"the page's setup commands failed:\n{script}\n{installed.stdout}{installed.stderr}"
    )
    venv_python = tmp_path / "venv" / "bin" / "python"
    where = subprocess.run(
        [venv_python, "-c", "import naiad, naiad_scale; print(naiad.__file__)"], capture_output=True, text=True
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout + where.stderr

    assert serve[:2] == ["naiad", "serve"]
    assert serve[2:] == ["--model-repository", "models"]  # the ports are chosen here, the folder is tmp_path's
    infer, metrics = requests
    curl = re.fullmatch(r"curl -s localhost:8000(\S+) -d\s+'(.*)'", infer.strip())
    assert curl is not None, f"{DOC}: the infer command changed shape: {infer}"
    assert metrics.startswith("curl -s localhost:8002/metrics | grep scale_requests")
    expected = metrics.partition("# ")[2]
    server = start_server(
        [tmp_path / "models"], env={"PYTHONPATH": ""}, program=[str(tmp_path / "venv" / "bin" / "naiad")]
    )
    try:
        path, body = curl.groups()
        request = urllib.request.Request(f"http://{server.http_url}{path}", data=body.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["outputs"][0]["data"] == [3, 6, 9]
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=30) as response:
            assert f"{expected}\n" in response.read().decode()
    finally:
        server.stop()
