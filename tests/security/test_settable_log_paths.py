"""Advisory class: settable log paths.

A logging API that takes a file path lets any client make the server write (and create) files
wherever it can. naiad fixes the log file at startup (``--log-file``); the logging extension refuses
``log_file`` over HTTP and gRPC, as Triton does, and nothing is written there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

REFUSAL = "log file location can not be updated through network protocol"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    running = start_server([ModelRepositoryBuilder(tmp_path_factory.mktemp("logpaths") / "models").root])
    yield running
    running.stop()


def test_http_refuses_a_log_file(server: ServerProcess, tmp_path: Path) -> None:
    target = tmp_path / "written-by-a-client.log"
    response = httpx.post(f"http://{server.http_url}/v2/logging", json={"log_file": str(target)})
    assert (response.status_code, response.json()) == (501, {"error": REFUSAL})
    assert not target.exists()
    assert httpx.get(f"http://{server.http_url}/v2/logging").json()["log_file"] == ""


def test_grpc_refuses_a_log_file(server: ServerProcess, tmp_path: Path) -> None:
    target = tmp_path / "written-by-a-client.log"
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    request = service_pb2.LogSettingsRequest()
    request.settings["log_file"].string_param = str(target)
    with pytest.raises(grpc.RpcError) as caught:
        stub.LogSettings(request)
    assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.UNIMPLEMENTED, REFUSAL)
    assert not target.exists()
