"""Loading a model from the load request's ``file:`` parameters, over HTTP (base64) and gRPC (bytes):
it loads from a fresh temporary folder, never the repository, which goes when the model does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2 as grpc_service_pb2
from tritonclient.grpc import service_pb2_grpc as grpc_service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .helpers import identity_config, identity_files, infer, wait_until

DOUBLER = b"""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2)]
            )
            for r in requests
        ]
"""

CONFIG = json.dumps(
    {
        "backend": "python",
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    }
)


_INTERNAL = {"http": "500", "grpc": "StatusCode.INTERNAL"}
_POLL_FAILURE = "failed to load '{}', failed to poll from model repository"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("overrides")


@pytest.fixture(scope="module")
def server(workspace: Path) -> Iterator[ServerProcess]:
    """An explicit-mode server whose temporary folders go to ``workspace/tmp``, where the tests see them."""
    repository = ModelRepositoryBuilder(workspace / "models")
    repository.add_model("plain", identity_config(), identity_files(1))
    (workspace / "tmp").mkdir()
    process = start_server(
        [repository.root], "--model-control-mode=explicit", "--load-model=plain", env={"TMPDIR": str(workspace / "tmp")}
    )
    yield process
    process.stop()


def _client(server: ServerProcess, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url)
    return grpcclient.InferenceServerClient(server.grpc_url)


def _override_folders(workspace: Path) -> list[Path]:
    return list((workspace / "tmp").glob("naiad-override-*"))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_loads_from_its_files_and_its_folder_goes_with_it(
    server: ServerProcess, workspace: Path, protocol: str
) -> None:
    client = _client(server, protocol)
    name = f"uploaded_{protocol}"
    client.load_model(name, config=CONFIG, files={"file:1/model.py": DOUBLER})
    assert infer(client, name, [1.0, 2.5]).tolist() == [2.0, 5.0]
    assert not (workspace / "models" / name).exists()  # the repository is untouched
    index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    assert name not in {entry["name"] for entry in index}  # as in Triton: it is in no repository
    assert len(_override_folders(workspace)) == 1

    client.load_model(name, config=CONFIG, files={"file:1/model.py": DOUBLER})  # a reload replaces the folder
    assert len(_override_folders(workspace)) == 1
    client.unload_model(name)
    wait_until(lambda: not _override_folders(workspace), what="the override folder to be removed")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("path", ["../escape.py", "1/../../escape.py", "/tmp/escape.py", "", "1\\..\\..\\escape.py"])
def test_paths_that_leave_the_model_folder_are_refused(
    server: ServerProcess, workspace: Path, protocol: str, path: str
) -> None:
    client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("sneaky", config=CONFIG, files={"file:1/model.py": DOUBLER, f"file:{path}": b"x = 1"})
    assert (caught.value.status(), caught.value.message()) == (_INTERNAL[protocol], _POLL_FAILURE.format("sneaky"))
    assert "a load request for model 'sneaky' was refused: Invalid file parameter 'file:" in server.logs()
    assert not _override_folders(workspace)
    assert not list(workspace.rglob("escape.py"))
    assert not client.is_model_ready("sneaky")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_files_need_a_config(server: ServerProcess, protocol: str) -> None:
    client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("configless", files={"file:1/model.py": DOUBLER})
    assert (caught.value.status(), caught.value.message()) == (_INTERNAL[protocol], _POLL_FAILURE.format("configless"))
    assert "Load parameter 'config' must be specified for model file override" in server.logs()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_file_name_too_long_is_refused_and_the_server_stays_up(
    server: ServerProcess, workspace: Path, protocol: str
) -> None:
    """What tritonclient's model-control example checks (Triton 2.51 itself aborts on it)."""
    client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("plain", config="{}", files={"file:" + "A" * 256: b"a"})
    assert (caught.value.status(), caught.value.message()) == (_INTERNAL[protocol], _POLL_FAILURE.format("plain"))
    assert client.is_server_live()
    assert client.is_model_ready("plain")
    assert not _override_folders(workspace)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_empty_config_is_a_bad_override_not_none(server: ServerProcess, protocol: str) -> None:
    """Triton refuses ``config=""`` too; it is not read as a plain load."""
    client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("plain", config="")
    assert (caught.value.status(), caught.value.message()) == (_INTERNAL[protocol], _POLL_FAILURE.format("plain"))
    assert "model config is not valid JSON: " in server.logs()
    assert client.is_model_ready("plain")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ('"parameters": {"config": {{"max_batch_size": "16"}}}', "model config is not valid JSON"),
        ('{"bogus_field": 1}', "no field named 'bogus_field'"),
        ('{"instance_group": [{"kind": "KIND_NOPE"}]}', "Invalid enum value KIND_NOPE"),
        ('{"platform": "python"}', "unexpected platform type 'python' for plain; 'python' is a backend"),
    ],
)
def test_a_config_that_does_not_parse_gets_tritons_answer(
    server: ServerProcess, protocol: str, config: str, reason: str
) -> None:
    """500 / INTERNAL ``failed to load '<m>', failed to poll from model repository``, the reason in the
    log: what tritonclient's model-control examples expect ("failed to load")."""
    client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("plain", config=config)
    assert (caught.value.status(), caught.value.message()) == (_INTERNAL[protocol], _POLL_FAILURE.format("plain"))
    assert reason in server.logs()
    assert client.is_model_ready("plain")


def test_a_plain_load_after_an_override_loads_from_the_repository(server: ServerProcess, workspace: Path) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    client.load_model("plain", config=CONFIG, files={"file:1/model.py": DOUBLER})
    assert infer(client, "plain", [3.0]).tolist() == [6.0]
    client.load_model("plain")
    assert infer(client, "plain", [3.0]).tolist() == [3.0]
    wait_until(lambda: not _override_folders(workspace), what="the replaced override folder to be removed")


def test_bad_base64_is_refused(server: ServerProcess) -> None:
    body = json.dumps({"parameters": {"config": CONFIG, "file:1/model.py": "not base64!"}}).encode()
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/bad/load", data=body)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400
    assert json.loads(caught.value.read()) == {"error": "File parameter 'file:1/model.py' is not valid base64"}


NOT_A_STRING = b'{"error":"attempt to access JSON non-string as string"}'
NOT_A_PARAMETER = b'{"error":"unexpected error on creating Triton parameter"}'


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [  # as Triton 2.51 answers them
        (b'{"parameters": 5}', 500, b'{"error":"attempt to get members for non-object"}'),
        (b'{"parameters": {"config": {"a": 1}}}', 500, NOT_A_STRING),
        (b'{"parameters": {"foo": "bar"}}', 500, NOT_A_PARAMETER),
        (b'{"parameters": {"unload_dependents": true}}', 500, NOT_A_STRING),
        (b'{"parameters": {"file:1/model.py": 5}}', 500, NOT_A_STRING),
        (b'{"parameters": {"foo": "bar", "config": 5}}', 500, NOT_A_PARAMETER),  # the first, in order
        (b"[]", 200, b""),  # not an object: no parameters
    ],
)
def test_a_load_body_is_read_as_triton_reads_it(server: ServerProcess, body: bytes, status: int, answer: bytes) -> None:
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/plain/load", data=body)
    try:
        with urllib.request.urlopen(request) as response:
            got = (response.status, response.headers["content-type"], response.read())
    except urllib.error.HTTPError as error:
        got = (error.code, error.headers["content-type"], error.read())
    assert got == (status, "application/json", answer)


@pytest.mark.parametrize(
    ("parameters", "message"),
    [  # as Triton 2.51 answers them
        ({"foo": grpc_service_pb2.ModelRepositoryParameter(string_param="bar")}, "unrecognized load parameter 'foo'."),
        (
            {"config": grpc_service_pb2.ModelRepositoryParameter(bool_param=True)},
            "invalid value type for load parameter 'config', expected string_param.",
        ),
        (
            {"file:1/model.py": grpc_service_pb2.ModelRepositoryParameter(string_param="x")},
            "invalid value type for load parameter 'file:1/model.py', expected bytes_param.",
        ),
    ],
)
def test_grpc_load_parameters_it_does_not_take(
    server: ServerProcess, parameters: dict[str, grpc_service_pb2.ModelRepositoryParameter], message: str
) -> None:
    stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    request = grpc_service_pb2.RepositoryModelLoadRequest(model_name="plain", parameters=parameters)
    with pytest.raises(grpc.RpcError) as caught:
        stub.RepositoryModelLoad(request, timeout=30)
    assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


def test_unload_parameters_are_read_as_triton_reads_them(server: ServerProcess) -> None:
    """gRPC refuses an ``unload_dependents`` that is not a bool; HTTP unloads whatever the parameters."""
    stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    not_a_bool = {"unload_dependents": grpc_service_pb2.ModelRepositoryParameter(string_param="yes")}
    with pytest.raises(grpc.RpcError) as caught:
        stub.RepositoryModelUnload(
            grpc_service_pb2.RepositoryModelUnloadRequest(model_name="plain", parameters=not_a_bool)
        )
    assert (caught.value.code(), caught.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value type for 'unload_dependents' parameter, expected bool_param.",
    )
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.is_model_ready("plain")
    for body in (b'{"parameters": 5}', b"{oops"):  # a body it cannot parse too, as Triton
        request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/plain/unload", data=body)
        with urllib.request.urlopen(request) as response:
            assert (response.status, response.read()) == (200, b"")
        assert not http.is_model_ready("plain")
        http.load_model("plain")


def test_a_load_or_unload_that_names_a_repository_is_refused_as_in_triton(server: ServerProcess) -> None:
    """Before the body is read; the HTTP index takes the name and ignores it, the gRPC one refuses it."""
    refused = b'{"error":"\'repository_name\' specification is not supported"}'
    for action in ("load", "unload"):
        request = urllib.request.Request(
            f"http://{server.http_url}/v2/repository/other/models/plain/{action}", data=b'{"parameters": 5}'
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        assert (caught.value.code, caught.value.read()) == (501, refused)
    http = httpclient.InferenceServerClient(server.http_url)
    index = urllib.request.Request(f"http://{server.http_url}/v2/repository/other/index", data=b"")
    with urllib.request.urlopen(index) as response:
        assert json.loads(response.read()) == http.get_model_repository_index()

    stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    bad = {"foo": grpc_service_pb2.ModelRepositoryParameter(string_param="bar")}
    calls = [
        (stub.RepositoryIndex, grpc_service_pb2.RepositoryIndexRequest(repository_name="other")),
        (
            stub.RepositoryModelLoad,
            grpc_service_pb2.RepositoryModelLoadRequest(repository_name="other", model_name="plain", parameters=bad),
        ),
        (
            stub.RepositoryModelUnload,
            grpc_service_pb2.RepositoryModelUnloadRequest(repository_name="other", model_name="plain"),
        ),
    ]
    for call, message in calls:
        with pytest.raises(grpc.RpcError) as rpc_error:
            call(message, timeout=30)
        assert (rpc_error.value.code(), rpc_error.value.details()) == (
            grpc.StatusCode.UNIMPLEMENTED,
            "'repository_name' specification is not supported",
        )
    assert http.is_model_ready("plain")
