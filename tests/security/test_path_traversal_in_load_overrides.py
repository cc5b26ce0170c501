"""Advisory class: path traversal in load overrides.

A ``config`` sent with a load request names files (``default_model_filename``, ``label_filename``,
backend parameters). Before, ``default_model_filename: "../../../../uploads/evil.py"`` or an absolute path
made the python backend import and run that file in the server (HTTP 200). Every such path must stay
inside the model's folder, symlinks resolved, and a refusal must not echo a server path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.testing import ModelRepositoryBuilder, ServerProcess, python_identity, start_server

ECHO = python_identity("OUT")

PBTXT = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model file outside the repository that leaves a mark if anything imports it."""
    uploads = tmp_path_factory.mktemp("uploads")
    marker = uploads / "EVIL_RAN"
    (uploads / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n{ECHO}")
    return uploads


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, planted: Path) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("traversal") / "models")
    model_dir = repository.add_model("echo", PBTXT, {"1/model.py": ECHO})
    (model_dir / "1" / "escape.py").symlink_to(planted / "evil.py")  # a symlink that leads out
    running = start_server([repository.root], "--model-control-mode=explicit", "--load-model=echo")
    yield running
    running.stop()


def _load(server: ServerProcess, **overrides: object) -> httpx.Response:
    config = json.dumps({**CONFIG, **overrides})
    return httpx.post(
        f"http://{server.http_url}/v2/repository/models/echo/load", json={"parameters": {"config": config}}
    )


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        ("../../../../../../../../uploads/evil.py", "must be a relative path inside the model's folder"),
        ("/tmp/evil.py", "must be a relative path inside the model's folder"),
        ("escape.py", "leads outside the model's folder"),
    ],
)
def test_a_model_file_outside_the_model_folder_is_refused(
    server: ServerProcess, planted: Path, filename: str, reason: str
) -> None:
    response = _load(server, default_model_filename=filename)
    assert response.status_code == 400
    message = response.json()["error"]
    assert message.startswith("load failed for model 'echo': ")
    assert f"default_model_filename '{filename}' {reason}" in message
    assert str(planted) not in message  # no server path: only what the client sent
    assert "/models/echo" not in message
    assert not (planted / "EVIL_RAN").exists()


def test_a_label_file_outside_the_model_folder_is_refused(server: ServerProcess, planted: Path) -> None:
    output = {"name": "OUT", "data_type": "TYPE_FP32", "dims": [1], "label_filename": "../../../etc/passwd"}
    response = _load(server, output=[output])
    assert response.status_code == 400
    assert (
        "label_filename '../../../etc/passwd' must be a relative path inside the model's folder"
        in (response.json()["error"])
    )


def test_grpc_load_overrides_are_confined_too(server: ServerProcess, planted: Path) -> None:
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    request = service_pb2.RepositoryModelLoadRequest(model_name="echo")
    config = {**CONFIG, "default_model_filename": "../../../../../../uploads/evil.py"}
    request.parameters["config"].string_param = json.dumps(config)
    with pytest.raises(grpc.RpcError) as caught:
        stub.RepositoryModelLoad(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must be a relative path inside the model's folder" in (caught.value.details() or "")
    assert not (planted / "EVIL_RAN").exists()


def test_the_model_keeps_serving_after_refused_overrides(server: ServerProcess) -> None:
    response = httpx.post(
        f"http://{server.http_url}/v2/models/echo/infer",
        json={"inputs": [{"name": "IN", "shape": [1], "datatype": "FP32", "data": [2.5]}]},
    )
    assert response.status_code == 200
    assert response.json()["outputs"][0]["data"] == [2.5]
