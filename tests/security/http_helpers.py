"""Raw HTTP over sockets and a small model repository, for the HTTP hardening tests.

Hostile clients do what ordinary HTTP clients will not (stop halfway, send endless chunks, lie about
sizes), so these tests speak HTTP/1.1 on plain sockets.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from naiad.testing import ModelRepositoryBuilder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
"""


def identity_config(data_type: str, dims: str = "[ -1 ]") -> str:
    return f"""
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "INPUT0" data_type: {data_type} dims: {dims} }} ]
        output [ {{ name: "OUTPUT0" data_type: {data_type} dims: {dims} }} ]
    """


def build_repository(root: Path) -> Path:
    """add_sub (FP32 [4] twice) and identity models of variable size: identity_uint8, identity_fp32, identity_bytes."""
    builder = ModelRepositoryBuilder(root)
    builder.add_model(
        "add_sub",
        (EXAMPLES / "add_sub" / "config.pbtxt").read_text(),
        {"1/model.py": (EXAMPLES / "add_sub" / "1" / "model.py").read_text()},
    )
    for name, data_type in (
        ("identity_uint8", "TYPE_UINT8"),
        ("identity_fp32", "TYPE_FP32"),
        ("identity_bytes", "TYPE_STRING"),
    ):
        builder.add_python_model(name, IDENTITY, identity_config(data_type))
    builder.add_python_model("identity_any_rank", IDENTITY, identity_config("TYPE_FP32", "[ -1, -1 ]"))
    return root


ADD_SUB_JSON = {
    "inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]
}


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(method: str, path: str, headers: dict[str, str] | None = None) -> bytes:
    """A request's head (request line and headers), ready to send."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_response(sock: socket.socket) -> Response:
    """The next response on ``sock`` (raises if the connection ends first)."""
    response = http.client.HTTPResponse(sock, method="POST")
    response.begin()
    body = response.read()
    return Response(response.status, {name.lower(): value for name, value in response.getheaders()}, body)


def request(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, timeout: float = 30
) -> Response:
    """One request on a fresh connection, Content-Length set."""
    with connect(port, timeout) as sock:
        sock.sendall(head(method, path, {"Content-Length": str(len(body)), **(headers or {})}) + body)
        return read_response(sock)


def post_json(port: int, path: str, document: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(document).encode()
    return request(port, "POST", path, body, {"Content-Type": "application/json", **(headers or {})})


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection (EOF or reset) within ``within`` seconds; data is drained."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True
    return False


def open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")
