"""gRPC over TLS with Triton's flags (``--grpc-use-ssl``, ``--grpc-use-ssl-mutual``), asked by tritonclient."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, python_identity, start_server

TLS = Path(__file__).resolve().parent / "tls"
CERT_FLAGS = (f"--grpc-server-cert={TLS / 'server.pem'}", f"--grpc-server-key={TLS / 'server.key.pem'}")

IDENTITY = python_identity("Y")
CONFIG = """
backend: "python"
input [ { name: "X" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""


def _repository(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    builder.add_python_model("identity", IDENTITY, CONFIG)
    return builder.root


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server([_repository(tmp_path_factory.mktemp("tls") / "models")], "--grpc-use-ssl=true", *CERT_FLAGS)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def mutual_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(
        [_repository(tmp_path_factory.mktemp("mtls") / "models")],
        "--grpc-use-ssl-mutual=true",
        *CERT_FLAGS,
        f"--grpc-root-cert={TLS / 'ca.pem'}",
    )
    yield process
    process.stop()


def _infer(client: grpcclient.InferenceServerClient) -> np.ndarray:
    tensor = grpcclient.InferInput("X", [2], "INT32")
    tensor.set_data_from_numpy(np.array([3, 4], np.int32))
    return client.infer("identity", [tensor]).as_numpy("Y")


def test_a_client_that_trusts_the_server_infers_over_tls(tls_server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(
        f"localhost:{tls_server.grpc_port}", ssl=True, root_certificates=str(TLS / "ca.pem")
    )
    np.testing.assert_array_equal(_infer(client), [3, 4])
    assert "(TLS)" in tls_server.logs()


def test_a_plaintext_client_is_not_served(tls_server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(f"localhost:{tls_server.grpc_port}")
    with pytest.raises(InferenceServerException, match=r"StatusCode\.UNAVAILABLE"):
        client.is_server_live(client_timeout=5)


def test_mutual_tls_serves_a_client_with_a_certificate_of_the_root_and_no_other(mutual_server: ServerProcess) -> None:
    address = f"localhost:{mutual_server.grpc_port}"
    with_certificate = grpcclient.InferenceServerClient(
        address,
        ssl=True,
        root_certificates=str(TLS / "ca.pem"),
        private_key=str(TLS / "client.key.pem"),
        certificate_chain=str(TLS / "client.pem"),
    )
    np.testing.assert_array_equal(_infer(with_certificate), [3, 4])
    without = grpcclient.InferenceServerClient(address, ssl=True, root_certificates=str(TLS / "ca.pem"))
    with pytest.raises(InferenceServerException, match=r"StatusCode\.UNAVAILABLE"):
        without.is_server_live(client_timeout=5)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--grpc-use-ssl=true",), "--grpc-use-ssl=true needs --grpc-server-cert and --grpc-server-key (PEM files)"),
        (("--grpc-use-ssl-mutual=true", *CERT_FLAGS), "--grpc-use-ssl-mutual=true needs --grpc-root-cert (PEM files)"),
        (
            ("--grpc-use-ssl=true", "--grpc-server-cert=/nonexistent/server.pem", CERT_FLAGS[1]),
            "cannot read --grpc-server-cert '/nonexistent/server.pem': No such file or directory",
        ),
    ],
)
def test_tls_flags_that_cannot_work_stop_the_start_with_the_reason(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "naiad", "serve", f"--model-repository={_repository(tmp_path / 'models')}", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert message in run.stderr
