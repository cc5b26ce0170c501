"""``EXECUTION_ENV_PATH``: python models in their own environments, a virtualenv or a packed archive.

The tests make their environments: virtualenvs of the test's own interpreter holding a library the
server has in another version (``idna``) and one the server lacks, so what the model sees tells which
environment it runs in; and one whose numpy is broken.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import idna
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ENV_VERSION = "0.0-from-the-model-environment"

# auto_complete_config fills in the inputs and outputs; the module imports a library only the environment has.
MODEL = """
import sys

import idna
import naiad_env_only
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [1]})
        config.add_output({"name": "IDNA", "data_type": "TYPE_STRING", "dims": [1]})
        config.add_output({"name": "PREFIX", "data_type": "TYPE_STRING", "dims": [1]})
        config.add_output({"name": "ONLY", "data_type": "TYPE_STRING", "dims": [1]})
        return config

    def execute(self, requests):
        texts = {"IDNA": idna.__version__, "PREFIX": sys.prefix, "ONLY": naiad_env_only.WHERE}
        tensors = [pb_utils.Tensor(name, np.array([text.encode()], dtype=np.object_)) for name, text in texts.items()]
        return [pb_utils.InferenceResponse(tensors) for _ in requests]
"""


def _config(env_path: str, extra: str = "") -> str:
    return (
        'backend: "python"\nmax_batch_size: 0\n'
        f'parameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env_path}" }} }}\n{extra}'
    )


def _virtualenv(path: Path, files: dict[str, str], *, copies: bool = False) -> Path:
    command = [sys.executable, "-m", "venv", "--without-pip", *(["--copies"] if copies else []), str(path)]
    subprocess.run(command, check=True, capture_output=True)
    (site_packages,) = path.glob("lib/python3*/site-packages")
    for relative, text in files.items():
        target = site_packages / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return path


ENV_FILES = {
    "idna/__init__.py": f"__version__ = {ENV_VERSION!r}\n",
    "naiad_env_only.py": "WHERE = 'the environment'\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("environments")
    venv = _virtualenv(root / "venv", ENV_FILES)
    packed = _virtualenv(root / "packed", {**ENV_FILES, "naiad_env_only.py": "WHERE = 'the archive'\n"}, copies=True)
    repository = ModelRepositoryBuilder(root / "models")
    repository.add_python_model("in_venv", MODEL, _config(str(venv)))
    archive_model = repository.add_python_model("in_archive", MODEL, _config("$$TRITON_MODEL_DIRECTORY/env.tar.gz"))
    with tarfile.open(archive_model / "env.tar.gz", "w:gz") as bundle:
        bundle.add(packed, arcname=".")
    broken = _virtualenv(root / "broken", {"numpy/__init__.py": "raise ImportError('this numpy is broken')\n"})
    repository.add_python_model("broken_numpy", MODEL, _config(str(broken)))
    repository.add_python_model("relative", MODEL, _config("env.tar.gz"))
    repository.add_python_model("missing", MODEL, _config(str(root / "nowhere")))
    isolation = 'parameters { key: "INSTANCE_ISOLATION" value: { string_value: "thread" } }'
    repository.add_python_model("in_thread", MODEL, _config(str(venv), isolation))
    repository.add_python_model("requested", MODEL, _config(str(venv)))
    running = start_server(
        [repository.root],
        "--model-control-mode=explicit",
        "--load-model=*",
        env={"NAIAD_CACHE_DIR": str(root / "cache")},
    )
    yield running
    running.stop()


def _ask(server: ServerProcess, model: str) -> dict[str, str]:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    result = client.infer(model, [tensor])
    client.close()
    return {name: result.as_numpy(name)[0].decode() for name in ("IDNA", "PREFIX", "ONLY")}


def _reasons(server: ServerProcess) -> dict[str, str]:
    client = httpclient.InferenceServerClient(server.http_url)
    index = client.get_model_repository_index()
    client.close()
    return {entry["name"]: entry.get("reason", "") for entry in index}


def test_a_model_runs_with_the_libraries_of_its_virtualenv(server: ServerProcess) -> None:
    seen = _ask(server, "in_venv")
    assert seen["IDNA"] == ENV_VERSION != idna.__version__  # not the server's idna
    assert seen["ONLY"] == "the environment"
    assert seen["PREFIX"].endswith("venv")
    assert _reasons(server)["in_venv"] == ""  # auto_complete_config ran there too: it imports naiad_env_only


def test_a_packed_environment_is_unpacked_once_into_the_cache(server: ServerProcess) -> None:
    seen = _ask(server, "in_archive")
    assert seen["IDNA"] == ENV_VERSION
    assert seen["ONLY"] == "the archive"
    prefix = Path(seen["PREFIX"])
    assert (prefix.parent.parent.name, prefix.parent.name) == ("cache", "python-envs")
    assert [path.name for path in prefix.parent.iterdir()] == [prefix.name]  # no staging left behind


def test_environment_problems_fail_the_load_saying_what_to_do(server: ServerProcess) -> None:
    reasons = _reasons(server)
    assert (
        "cannot run a python model worker (ImportError: this numpy is broken); install numpy into that environment"
        in reasons["broken_numpy"]
    )
    assert reasons["relative"] == (
        "Invalid argument: python model 'relative': EXECUTION_ENV_PATH 'env.tar.gz' is not an absolute path; "
        "start it with $$TRITON_MODEL_DIRECTORY to name a file in the model directory"
    )
    assert reasons["missing"].endswith("/nowhere' does not exist")
    assert reasons["in_thread"] == (
        "Invalid argument: python model 'in_thread': EXECUTION_ENV_PATH needs a worker process; remove "
        "INSTANCE_ISOLATION "
        '"thread" (or set it to "process")'
    )


def test_a_load_request_may_only_name_an_environment_inside_the_model_folder(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    config = json.dumps({"backend": "python", "parameters": {"EXECUTION_ENV_PATH": {"string_value": sys.prefix}}})
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("requested", config=config)
    client.close()
    assert refused.value.status() == "400"
    assert refused.value.message() == (
        "load failed for model 'requested': version 1 is at UNAVAILABLE state: Invalid argument: python model "
        "'requested': "
        "EXECUTION_ENV_PATH in a config sent with a load request must start with $$TRITON_MODEL_DIRECTORY/ "
        "(an environment inside the model's folder);\n"
    )
