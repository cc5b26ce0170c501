"""A tritonserver command line starts naiad unchanged: Triton's flags for parts naiad does not have are
accepted and named at startup, its deprecated tracing flags still configure tracing, and what naiad
cannot serve is refused with the reason."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import deserialize_bytes_tensor

from naiad.cli import build_parser, options_from_args
from naiad.http.serving import bind_socket
from naiad.testing import ModelRepositoryBuilder, ServerProcess, python_identity, start_server

TRITON_COMMAND_LINE = (
    "--id=edge-7",
    "--backend-directory=/opt/tritonserver/backends",
    "--pinned-memory-pool-byte-size=268435456",
    "--cuda-memory-pool-byte-size=0:67108864",
    "--cuda-memory-pool-byte-size=1:67108864",
    "--http-thread-count=8",
    "--host-policy=gpu_0,numa-node=0",
    "--allow-sagemaker=false",
    "--allow-vertex-ai=false",
    "--model-namespacing=false",
    "--trace-level=TIMESTAMPS",
    "--trace-rate=50",
    "--trace-count=-1",
    "--trace-log-frequency=0",
)


IDENTITY = python_identity("Y")

CONFIG = """
backend: "python"
max_batch_size: {batch}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""


ECHO_PARAMETERS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("P", np.array([r.parameters().encode()], dtype=np.object_))])
            for r in requests
        ]
"""

FAILS_ONCE = ECHO_PARAMETERS.replace(
    "class TritonPythonModel:",
    """from pathlib import Path


class TritonPythonModel:
    def initialize(self, args):
        marker = Path(MARKER)
        if not marker.exists():
            marker.touch()
            raise RuntimeError("first load fails")
""",
)

ECHO_CONFIG = """
backend: "python"
input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "P" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("triton_flags")
    builder = ModelRepositoryBuilder(root / "models")
    for name, custom in (("tuned", True), ("plain", False)):
        files = {"1/model.py": IDENTITY}
        if custom:
            files["configs/h100.pbtxt"] = CONFIG.format(batch=8)
        builder.add_model(name, CONFIG.format(batch=0), files)
    builder.add_python_model("echo_parameters", ECHO_PARAMETERS, ECHO_CONFIG)
    builder.add_python_model("fails_once", FAILS_ONCE.replace("MARKER", repr(str(root / "tried"))), ECHO_CONFIG)
    trace_file = root / "trace.json"
    process = start_server(
        [builder.root],
        *TRITON_COMMAND_LINE,
        "--model-config-name=h100",
        f"--trace-file={trace_file}",
        "--http-header-forward-pattern=^x-t",
        "--grpc-header-forward-pattern=TENANT",
        "--model-load-retry-count=1",
    )
    yield process
    process.stop()


def test_the_server_starts_and_names_each_flag_without_effect(server: ServerProcess) -> None:
    logs = server.logs()
    assert "--pinned-memory-pool-byte-size=268435456 has no effect in naiad: naiad keeps no such memory pool" in logs
    assert "--cuda-memory-pool-byte-size=1:67108864 has no effect in naiad" in logs
    assert "--backend-directory" not in logs  # naiad reads it: python-based backends
    assert "--allow-sagemaker" not in logs  # false is what naiad does anyway


def test_id_names_the_server_in_its_metadata(server: ServerProcess) -> None:
    assert httpclient.InferenceServerClient(server.http_url).get_server_metadata()["name"] == "edge-7"
    assert grpcclient.InferenceServerClient(server.grpc_url).get_server_metadata().name == "edge-7"


def test_the_deprecated_trace_flags_set_the_trace_settings(server: ServerProcess) -> None:
    settings = httpclient.InferenceServerClient(server.http_url).get_trace_settings()
    assert settings["trace_level"] == ["TIMESTAMPS"]
    assert settings["trace_rate"] == "50"
    assert settings["trace_count"] == "-1"
    assert settings["log_frequency"] == "0"
    assert settings["trace_file"].endswith("trace.json")
    assert (  # Triton's warning, word for word
        "Warning: '--trace-level' has been deprecated and will be removed in future releases. Please use "
        "'--trace-config level=<OFF|TIMESTAMPS|TENSORS> instead."
    ) in server.logs()


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("--allow-sagemaker=true", "not Amazon SageMaker's protocol"),
        ("--allow-vertex-ai=true", "not Vertex AI's protocol"),
        ("--model-namespacing=true", "naiad has no model namespaces"),
    ],
)
def test_what_naiad_cannot_serve_is_refused_at_startup(tmp_path: Path, flag: str, why: str) -> None:
    repository = ModelRepositoryBuilder(tmp_path / "models").root
    run = subprocess.run(
        [sys.executable, "-m", "naiad", "serve", f"--model-repository={repository}", flag],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert f"{flag}: " in run.stderr
    assert why in run.stderr


def test_model_config_name_picks_each_models_custom_config_where_it_has_one(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.get_model_config("tuned")["max_batch_size"] == 8  # configs/h100.pbtxt
    assert client.get_model_config("plain")["max_batch_size"] == 0  # no configs/h100.pbtxt: config.pbtxt


def test_headers_matching_the_forward_patterns_reach_the_model_as_parameters(server: ServerProcess) -> None:
    """As Triton: matched anywhere in the name, ignoring case; other headers stay out."""
    headers = {"X-Tenant": "acme", "x-trace-id": "t1", "Authorization": "secret", "y-x-foo": "z"}
    http = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("X", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    seen = http.infer("echo_parameters", [tensor], headers=dict(headers), parameters={"p": 1}).as_numpy("P")[0]
    assert json.loads(seen) == {"p": 1, "X-Tenant": "acme", "x-trace-id": "t1"}  # ^x-t, named as sent
    body = json.dumps({"inputs": [{"name": "X", "shape": [1], "datatype": "INT32", "data": [1]}]}).encode()
    chunked = httpx.post(  # a chunked body is served by the ASGI path, which names them as sent too
        f"http://{server.http_url}/v2/models/echo_parameters/infer", content=iter([body]), headers=headers, timeout=30
    )
    assert json.loads(chunked.json()["outputs"][0]["data"][0]) == {"X-Tenant": "acme", "x-trace-id": "t1"}
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    over_grpc = grpcclient.InferInput("X", [1], "INT32")
    over_grpc.set_data_from_numpy(np.array([1], np.int32))
    metadata = {"x-tenant": "acme", "x-trace-id": "t1", "authorization": "secret"}
    seen = grpc.infer("echo_parameters", [over_grpc], headers=metadata).as_numpy("P")[0]
    assert json.loads(seen) == {"x-tenant": "acme"}  # TENANT


def test_a_version_that_failed_to_load_is_loaded_again_with_the_retry_count(server: ServerProcess) -> None:
    assert httpclient.InferenceServerClient(server.http_url).is_model_ready("fails_once")
    assert "loading model 'fails_once' version 1 again (retry 1 of 1, --model-load-retry-count)" in server.logs()


def test_reuse_http_port_lets_two_listeners_share_the_port() -> None:
    first = bind_socket("127.0.0.1", 0, "HTTP", "--http-port", reuse_port=True)
    port = first.getsockname()[1]
    try:
        second = bind_socket("127.0.0.1", port, "HTTP", "--http-port", reuse_port=True)
        second.close()
        with pytest.raises(OSError, match=f"cannot listen for HTTP on 127.0.0.1:{port}"):
            bind_socket("127.0.0.1", port, "HTTP", "--http-port")
    finally:
        first.close()
    options = options_from_args(build_parser().parse_args(["serve", "--model-repository=.", "--reuse-http-port=true"]))
    assert options.reuse_http_port


def test_an_ipv6_address_may_come_in_brackets_as_tritons_grpc_address_takes_it() -> None:
    flags = ["--grpc-address=[::1]", "--http-address=[::1]", "--metrics-address=::1"]
    options = options_from_args(build_parser().parse_args(["serve", "--model-repository=.", *flags]))
    assert (options.grpc_address, options.http_address, options.metrics.address) == ("::1", "::1", "::1")


TRITONSERVER_2_51_FLAGS = (
    "--allow-cpu-metrics",
    "--allow-gpu-metrics",
    "--allow-grpc",
    "--allow-http",
    "--allow-metrics",
    "--allow-metrics",
    "--allow-sagemaker",
    "--allow-vertex-ai",
    "--backend-config",
    "--backend-directory",
    "--buffer-manager-thread-count",
    "--cache-config",
    "--cache-directory",
    "--cuda-memory-pool-byte-size",
    "--cuda-virtual-address-size",
    "--disable-auto-complete-config",
    "--enable-peer-access",
    "--exit-on-error",
    "--exit-timeout-secs",
    "--grpc-address",
    "--grpc-header-forward-pattern",
    "--grpc-http2-max-ping-strikes",
    "--grpc-http2-max-pings-without-data",
    "--grpc-http2-min-recv-ping-interval-without-data",
    "--grpc-infer-allocation-pool-size",
    "--grpc-infer-response-compression-level",
    "--grpc-keepalive-permit-without-calls",
    "--grpc-keepalive-time",
    "--grpc-keepalive-timeout",
    "--grpc-max-connection-age",
    "--grpc-max-connection-age-grace",
    "--grpc-port",
    "--grpc-restricted-protocol",
    "--grpc-root-cert",
    "--grpc-server-cert",
    "--grpc-server-key",
    "--grpc-use-ssl",
    "--grpc-use-ssl",
    "--grpc-use-ssl-mutual",
    "--help",
    "--host-policy",
    "--host-policy",
    "--http-address",
    "--http-header-forward-pattern",
    "--http-port",
    "--http-restricted-api",
    "--http-thread-count",
    "--id",
    "--load-model",
    "--load-model",
    "--log-error",
    "--log-file",
    "--log-format",
    "--log-info",
    "--log-verbose",
    "--log-warning",
    "--metrics-address",
    "--metrics-config",
    "--metrics-interval-ms",
    "--metrics-port",
    "--min-supported-compute-capability",
    "--model-config-name",
    "--model-config-name",
    "--model-control-mode",
    "--model-load-gpu-limit",
    "--model-load-retry-count",
    "--model-load-thread-count",
    "--model-namespacing",
    "--model-repository",
    "--model-store",
    "--pinned-memory-pool-byte-size",
    "--rate-limit",
    "--rate-limit-resource",
    "--rate-limit-resource",
    "--repoagent-directory",
    "--repository-poll-secs",
    "--response-cache-byte-size",
    "--reuse-grpc-port",
    "--reuse-http-port",
    "--sagemaker-port",
    "--sagemaker-safe-port-range",
    "--sagemaker-thread-count",
    "--strict-model-config",
    "--strict-readiness",
    "--trace-config",
    "--trace-count",
    "--trace-file",
    "--trace-level",
    "--trace-log-frequency",
    "--trace-log-frequency",
    "--trace-rate",
    "--vertex-ai-default-model",
    "--vertex-ai-port",
    "--vertex-ai-thread-count",
)
"""Every flag ``tritonserver --help`` lists in Triton 2.51."""


def test_every_flag_of_tritonserver_is_accepted() -> None:
    serve = next(
        action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)
    ).choices["serve"]
    accepted = {flag for action in serve._actions for flag in action.option_strings}
    assert [flag for flag in TRITONSERVER_2_51_FLAGS if flag not in accepted] == []


def test_binary_metadata_and_http_only_keys_reach_a_model_over_grpc(server: ServerProcess) -> None:
    """A ``-bin`` metadata value arrives as bytes: it reaches the model as text, as in Triton (it took
    a python model's process down); ``binary_data_output`` is HTTP's, a custom key over gRPC."""
    request = service_pb2.ModelInferRequest(model_name="echo_parameters")
    request.inputs.add(name="X", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([1], np.int32).tobytes())
    request.parameters["binary_data_output"].bool_param = True
    metadata = (("x-tenant-bin", b"acme"), ("tenant-raw-bin", b"\xffz"))
    with grpc.insecure_channel(server.grpc_url) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, metadata=metadata, timeout=30)
    (seen,) = deserialize_bytes_tensor(response.raw_output_contents[0])
    assert json.loads(seen) == {"binary_data_output": True, "x-tenant-bin": "acme", "tenant-raw-bin": "\ufffdz"}
    body = {
        "inputs": [{"name": "X", "shape": [1], "datatype": "INT32", "data": [1]}],
        "parameters": {"binary_data_output": False, "p": 1},
    }
    answer = httpx.post(f"http://{server.http_url}/v2/models/echo_parameters/infer", json=body, timeout=30)
    assert json.loads(answer.json()["outputs"][0]["data"][0]) == {"p": 1}
