"""The gRPC frontend's flags, listener and shutdown."""

from __future__ import annotations

import queue
import socket
import struct
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from naiad.cli import build_parser, options_from_args
from naiad.grpc import GrpcSettings
from naiad.testing import start_server
from naiad.testing.process import ServerStartError


def test_flags_have_tritons_names_and_defaults() -> None:
    defaults = options_from_args(build_parser().parse_args(["serve", "--model-repository", "."]))
    assert (defaults.allow_grpc, defaults.grpc_address, defaults.grpc_port) == (True, "0.0.0.0", 8001)
    assert defaults.grpc == GrpcSettings()
    options = options_from_args(
        build_parser().parse_args(
            [
                "serve",
                "--model-repository=.",
                "--allow-grpc=false",
                "--grpc-address=127.0.0.1",
                "--grpc-port=9000",
                "--grpc-keepalive-time=1000",
                "--grpc-keepalive-timeout=500",
                "--grpc-keepalive-permit-without-calls=true",
                "--grpc-http2-max-pings-without-data=0",
                "--grpc-http2-min-recv-ping-interval-without-data=100",
                "--grpc-http2-max-ping-strikes=5",
                "--grpc-max-connection-age=60000",
                "--grpc-max-connection-age-grace=1000",
                "--grpc-infer-response-compression-level=medium",
                "--reuse-grpc-port=true",
            ]
        )
    )
    assert (options.allow_grpc, options.grpc_address, options.grpc_port) == (False, "127.0.0.1", 9000)
    assert dict(options.grpc.channel_options()) == {
        "grpc.keepalive_time_ms": 1000,
        "grpc.keepalive_timeout_ms": 500,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.max_pings_without_data": 0,
        "grpc.http2.min_ping_interval_without_data_ms": 100,
        "grpc.http2.max_ping_strikes": 5,
        "grpc.max_connection_age_ms": 60000,
        "grpc.max_connection_age_grace_ms": 1000,
        "grpc.default_compression_level": 2,
        "grpc.so_reuseport": 1,
    }


def test_bad_compression_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--model-repository=.", "--grpc-infer-response-compression-level=max"])
    assert "--grpc-infer-response-compression-level" in capsys.readouterr().err


def _raw_infer(url: str) -> httpx.Response:
    """A ModelInfer over plain HTTP/2, to see the response's grpc-encoding header."""
    request = service_pb2.ModelInferRequest(model_name="identity_fp64")
    request.inputs.add(name="INPUT0", datatype="FP64", shape=[4096])
    request.raw_input_contents.append(np.zeros(4096).tobytes())
    body = request.SerializeToString()
    with httpx.Client(http1=False, http2=True, timeout=30) as client:
        return client.post(
            f"http://{url}/inference.GRPCInferenceService/ModelInfer",
            content=struct.pack(">BI", 0, len(body)) + body,
            headers={"content-type": "application/grpc", "te": "trailers", "grpc-accept-encoding": "gzip,deflate"},
        )


def test_transport_flags_and_response_compression(core_repository: Path) -> None:
    server = start_server(
        [core_repository],
        "--grpc-infer-response-compression-level=high",
        "--grpc-keepalive-time=10000",
        "--grpc-keepalive-permit-without-calls=true",
        "--grpc-http2-max-pings-without-data=0",
        "--grpc-max-connection-age=600000",
    )
    try:
        response = _raw_infer(server.grpc_url)
        assert response.headers.get("grpc-encoding") in ("gzip", "deflate")
        assert response.content[0] == 1  # the message is compressed
        assert len(response.content) < 4096
        client = grpcclient.InferenceServerClient(server.grpc_url)
        tensor = grpcclient.InferInput("INPUT0", [3], "FP64")
        tensor.set_data_from_numpy(np.array([1.5, 0.0, -2.0]))
        result = client.infer("identity_fp64", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [1.5, 0.0, -2.0])
    finally:
        assert server.stop() == 0


def test_grpc_can_be_turned_off(core_repository: Path) -> None:
    server = start_server([core_repository], "--allow-grpc=false")
    try:
        assert "gRPC on" not in server.logs()
        with grpc.insecure_channel(server.grpc_url) as channel, pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(channel).result(timeout=1)
    finally:
        server.stop()


def test_taken_grpc_port_is_a_startup_error(core_repository: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ServerStartError) as caught:
            start_server([core_repository], f"--grpc-port={port}")
    message = str(caught.value)
    assert "exited with code 1" in message
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in message
    assert "--grpc-port" in message


def test_shutdown_ends_open_streams(core_repository: Path, grpc_repository: Path) -> None:
    server = start_server([core_repository, grpc_repository], "--exit-timeout-secs=1")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put(result or error))
    count = grpcclient.InferInput("IN", [1], "INT32")
    count.set_data_from_numpy(np.array([10_000], dtype=np.int32))
    delay = grpcclient.InferInput("DELAY", [1], "FP32")
    delay.set_data_from_numpy(np.array([0.01], dtype=np.float32))
    client.async_stream_infer("repeat_int32", [count, delay])
    answers.get(timeout=30)
    assert server.stop(timeout=20) == 1  # as Triton: the exit timeout passed with the stream in flight
    assert "exit timeout expired: 1 request(s) still in flight 1 s after the stop signal" in server.logs()
    client.stop_stream()
    client.close()
