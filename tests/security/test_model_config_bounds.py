"""A config, from the repository or a load request, cannot claim another model's name or unbounded instances.

Before, a load request for ``add_sub`` with ``name: "string_reverse"`` loaded into the ``add_sub`` folder,
and ``instance_group count: 200`` started 200 threads. Triton refuses the name (the directory name must
equal the model name); naiad caps instances with ``--max-instances-per-model``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

CONFIG = """
name: "{name}"
backend: "identity"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""

OVERRIDE = {
    "backend": "identity",
    "max_batch_size": 0,
    "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("bounds") / "models")
    repository.add_model("echo", CONFIG.format(name="echo"), {"1/.keep": ""})
    repository.add_model("misnamed", CONFIG.format(name="someone_else"), {"1/.keep": ""})
    running = start_server(
        [repository.root], "--model-control-mode=explicit", "--load-model=*", "--max-instances-per-model=4"
    )
    yield running
    running.stop()


def _load(server: ServerProcess, model: str, **overrides: object) -> httpx.Response:
    config = json.dumps({**OVERRIDE, **overrides})
    return httpx.post(
        f"http://{server.http_url}/v2/repository/models/{model}/load", json={"parameters": {"config": config}}
    )


def _infer(server: ServerProcess) -> httpx.Response:
    body = {"inputs": [{"name": "IN", "shape": [1], "datatype": "FP32", "data": [1.5]}]}
    return httpx.post(f"http://{server.http_url}/v2/models/echo/infer", json=body)


def test_a_config_in_the_repository_must_carry_its_folders_name(server: ServerProcess) -> None:
    index = {entry["name"]: entry for entry in httpx.post(f"http://{server.http_url}/v2/repository/index").json()}
    assert index["misnamed"] == {"name": "misnamed"}  # never loaded, as Triton lists a failed poll
    assert (
        "unexpected directory name 'misnamed' for model 'someone_else', directory name must equal model name"
    ) in server.logs()
    assert httpx.get(f"http://{server.http_url}/v2/models/someone_else").status_code == 404


def test_a_load_request_cannot_rename_a_model(server: ServerProcess) -> None:
    response = _load(server, "echo", name="string_reverse")
    assert (response.status_code, response.json()) == (
        500,
        {"error": "failed to load 'echo', failed to poll from model repository"},
    )
    assert _infer(server).json()["outputs"][0]["data"] == [1.5]  # still the same model, still serving
    assert httpx.get(f"http://{server.http_url}/v2/models/string_reverse").status_code == 404
    assert "unexpected directory name 'echo' for model 'string_reverse'" in server.logs()


def test_instance_counts_are_capped(server: ServerProcess) -> None:
    response = _load(server, "echo", instance_group=[{"kind": "KIND_CPU", "count": 200}])
    assert response.status_code == 400
    assert response.json()["error"] == (
        "load failed for model 'echo': version 1 is at UNAVAILABLE state: Invalid argument: model 'echo' asks for "
        "200 instances, "
        "more than --max-instances-per-model allows (4); lower the instance_group counts, or raise the limit;\n"
    )
    assert _infer(server).status_code == 200  # the loaded version keeps serving
    assert _load(server, "echo", instance_group=[{"kind": "KIND_CPU", "count": 4}]).status_code == 200
