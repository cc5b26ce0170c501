"""Finding 5 (HTTP), open control APIs: ``--http-restricted-api`` as Triton 2.51 has it.

The probe loaded models, switched all logging off and flooded the log from any client. A restricted
group now answers a call without its header (or with another value) with Triton's 403 (checked
against Triton 2.51: status, ``text/plain`` content type, body), whatever the method; the groups are
Triton's (health includes model readiness, inference includes generate). Plugin routes are in no group.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from tritonclient.utils import InferenceServerException

from naiad.backend import ServerHandle, hookimpl
from naiad.restrictions import parse_restrictions
from naiad.testing import ServerProcess, ThreadedServer, serve_in_thread, start_server

from .http_helpers import ADD_SUB_JSON, build_repository, connect, head, post_json, read_response, request

ADMIN = {"admin-key": "s3cret"}
INFER = {"infer-key": "letmein"}
OPS = {"ops": "1"}
FLAGS = (
    "--http-restricted-api=model-repository,logging:admin-key=s3cret",
    "--http-restricted-api=inference,model-config:infer-key=letmein",
    "--http-restricted-api=statistics,trace,shared-memory,metadata:ops=1",
    "--model-control-mode=explicit",
    "--load-model=add_sub",
)

# (method, path, the header its group needs); every group but health (restricted below, in process)
ENDPOINTS = [
    ("POST", "/v2/repository/index", ADMIN),
    ("POST", "/v2/repository/models/add_sub/load", ADMIN),
    ("POST", "/v2/repository/models/add_sub/unload", ADMIN),
    ("GET", "/v2/repository/index", ADMIN),
    ("GET", "/v2/logging", ADMIN),
    ("POST", "/v2/logging", ADMIN),
    ("POST", "/v2/models/add_sub/infer", INFER),
    ("POST", "/v2/models/add_sub/versions/1/infer", INFER),
    ("GET", "/v2/models/add_sub/infer", INFER),
    ("POST", "/v2/models/no_such_model/infer", INFER),
    ("POST", "/v2/models/add_sub/generate", INFER),
    ("POST", "/v2/models/add_sub/generate_stream", INFER),
    ("GET", "/v2/models/add_sub/config", INFER),
    ("GET", "/v2/models/stats", OPS),
    ("GET", "/v2/models/add_sub/stats", OPS),
    ("GET", "/v2/trace/setting", OPS),
    ("GET", "/v2/models/add_sub/trace/setting", OPS),
    ("GET", "/v2/systemsharedmemory/status", OPS),
    ("POST", "/v2/cudasharedmemory/region/r/unregister", OPS),
    ("GET", "/v2", OPS),
    ("GET", "/v2/models/add_sub", OPS),
    ("GET", "/v2/models/add_sub/versions/1", OPS),
]


def _forbidden(key: str) -> bytes:
    return json.dumps({"error": f"This API is restricted, expecting header '{key}'"}, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server([build_repository(tmp_path_factory.mktemp("restricted") / "models")], *FLAGS)
    yield process
    process.stop()


@pytest.mark.parametrize(("method", "path", "needed"), ENDPOINTS)
def test_a_restricted_endpoint_without_its_header_gets_tritons_403(
    server: ServerProcess, method: str, path: str, needed: dict[str, str]
) -> None:
    response = request(server.http_port, method, path)
    assert response.status == 403
    assert response.headers["content-type"] == "text/plain"
    assert response.body == _forbidden(next(iter(needed)))
    other = {next(iter(needed)): "wrong"}
    assert request(server.http_port, method, path, headers=other).status == 403


@pytest.mark.parametrize(("method", "path", "needed"), ENDPOINTS)
def test_the_header_opens_the_endpoint(server: ServerProcess, method: str, path: str, needed: dict[str, str]) -> None:
    body = b"{}" if method == "POST" and "repository" in path else b""
    if path.endswith("/unload"):
        return  # unloading add_sub would change what the other tests see; the 403 is tested above
    response = request(server.http_port, method, path, body, headers=needed)
    assert response.status != 403


def test_the_header_name_is_case_insensitive(server: ServerProcess) -> None:
    assert request(server.http_port, "GET", "/v2/logging", headers={"ADMIN-KEY": "s3cret"}).status == 200


def test_groups_not_restricted_stay_open(server: ServerProcess) -> None:
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/add_sub/ready"):
        assert request(server.http_port, "GET", path).status == 200


def test_a_client_without_the_header_cannot_silence_the_error_log(server: ServerProcess) -> None:
    response = post_json(server.http_port, "/v2/logging", {"log_error": False})
    assert response.status == 403
    settings = request(server.http_port, "GET", "/v2/logging", headers=ADMIN).json()
    assert settings["log_error"] is True


def test_a_client_without_the_header_cannot_load_a_model(server: ServerProcess) -> None:
    config = json.dumps({"backend": "python", "default_model_filename": "/tmp/evil.py"})
    response = post_json(server.http_port, "/v2/repository/models/add_sub/load", {"parameters": {"config": config}})
    assert response.status == 403


def test_a_refused_upload_closes_the_connection_unread(server: ServerProcess) -> None:
    with connect(server.http_port, timeout=5) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", {"Content-Length": str(1 << 30)}))
        response = read_response(sock)
    assert response.status == 403
    assert response.headers["connection"] == "close"


def test_tritonclient_passes_the_header(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [4], "FP32")
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
        inputs.append(tensor)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", inputs)
    assert caught.value.status() == "403"
    assert caught.value.message() == "This API is restricted, expecting header 'infer-key'"
    result = client.infer("add_sub", inputs, headers=dict(INFER))  # tritonclient adds to the dict it is given
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full(4, 2, dtype=np.float32))
    assert post_json(server.http_port, "/v2/models/add_sub/infer", ADD_SUB_JSON, INFER).status == 200


class RoutesPlugin:
    """A plugin route, ``/v1/hello``: in no restricted group."""

    @hookimpl
    def naiad_http_routes(self, server: ServerHandle) -> Sequence[BaseRoute]:
        async def hello(request: Request) -> Response:
            return JSONResponse({"hello": "world"})

        return [Route("/v1/hello", hello)]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repository: Path = build_repository(tmp_path_factory.mktemp("restricted_health") / "models")
    restrictions = parse_restrictions(["health,inference:hk=1"], "api")
    with serve_in_thread([repository], plugins={"routes": RoutesPlugin()}, http_restrictions=restrictions) as server:
        yield server


def test_health_and_model_readiness_are_one_group(in_process: ThreadedServer) -> None:
    paths = ("/v2/health/live", "/v2/health/ready", "/v2/models/add_sub/ready", "/v2/models/add_sub/versions/1/ready")
    for path in paths:
        response = request(in_process.http_port, "GET", path)
        assert (response.status, response.body) == (403, _forbidden("hk"))
        assert request(in_process.http_port, "GET", path, headers={"hk": "1"}).status == 200


def test_plugin_routes_are_in_no_group(in_process: ThreadedServer) -> None:
    response = request(in_process.http_port, "GET", "/v1/hello")
    assert (response.status, response.json()) == (200, {"hello": "world"})
    assert request(in_process.http_port, "GET", "/v2/nothing/here").status == 404
