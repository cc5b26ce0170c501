"""``--grpc-max-message-size``: the largest message received or sent, decompressed or not.

A received message over the limit is refused by grpc core with RESOURCE_EXHAUSTED ("Received
message larger than max (<size> vs. <limit>)", as Triton's gRPC answers) as soon as its length
prefix arrives, before it is buffered; a compressed one that would inflate past the limit with
RESOURCE_EXHAUSTED ("Decompressed message larger than max") while inflating. A response over the
limit is an error of its request (INVALID_ARGUMENT, naming the flag), in a stream as well, and the
stream goes on. Triton's default, gRPC's largest message (2 GiB - 1), stays the default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from naiad.grpc.serving import limit_options
from naiad.limits import GrpcLimits
from naiad.testing import ServerProcess, start_server

from .grpc_helpers import (
    MIB,
    add_sub_request,
    build_repository,
    channel,
    count_request,
    fill_request,
    proc_status,
    raw_infer,
    rpc_error,
    stub,
)

LIMIT = 1 * MIB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("grpc-size") / "models")
    server = start_server([repository], f"--grpc-max-message-size={LIMIT}")
    yield server
    server.stop()


def _peak_mib(server: ServerProcess) -> float:
    return proc_status(server.process.pid, "VmHWM") / 1024


def test_default_is_grpcs_largest_message() -> None:
    options = dict(limit_options(GrpcLimits()))
    assert options["grpc.max_receive_message_length"] == options["grpc.max_send_message_length"] == 2**31 - 1


def test_a_message_under_the_limit_is_served(server: ServerProcess) -> None:
    response = raw_infer(channel(server.grpc_url), count_request(LIMIT - 4096))
    assert np.frombuffer(response.raw_output_contents[0], np.int64)[0] == LIMIT - 4096


def test_a_larger_message_is_refused_before_it_is_buffered(server: ServerProcess) -> None:
    target = channel(server.grpc_url)
    raw_infer(target, count_request(16))
    peak = _peak_mib(server)
    data = count_request(256 * MIB)
    error = rpc_error(lambda: raw_infer(target, data))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"Received message larger than max ({len(data)} vs. {LIMIT})" in str(error.details())
    assert _peak_mib(server) - peak < 32  # before: the 256 MiB message was read whole, three times over
    raw_infer(target, count_request(16))  # the connection and the server go on


def test_a_compressed_message_is_refused_when_it_inflates_past_the_limit(server: ServerProcess) -> None:
    target = channel(server.grpc_url)
    raw_infer(target, count_request(16))
    peak = _peak_mib(server)
    bomb = count_request(128 * MIB)  # ones compress about 1000:1, well under the limit
    error = rpc_error(lambda: raw_infer(target, bomb, compression=grpc.Compression.Gzip))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "Decompressed message larger than max" in str(error.details())
    assert _peak_mib(server) - peak < 32
    small = raw_infer(target, count_request(1000), compression=grpc.Compression.Gzip)
    assert np.frombuffer(small.raw_output_contents[0], np.int64)[0] == 1000


def test_a_response_over_the_limit_is_an_invalid_argument(server: ServerProcess) -> None:
    error = rpc_error(lambda: stub(server.grpc_url).ModelInfer(fill_request(2048)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(error.details()).startswith("the response is ")
    assert f"bytes, more than the gRPC message limit of {LIMIT} bytes (--grpc-max-message-size)" in str(error.details())


def test_a_stream_response_over_the_limit_is_an_error_of_its_request(server: ServerProcess) -> None:
    requests = [fill_request(2048, request_id="big"), add_sub_request(2.0, request_id="after")]
    big, after = stub(server.grpc_url).ModelStreamInfer(iter(requests), timeout=30)
    assert big.infer_response.id == "big"
    assert f"more than the gRPC message limit of {LIMIT} bytes" in big.error_message
    assert (after.infer_response.id, after.error_message) == ("after", "")
    assert np.frombuffer(after.infer_response.raw_output_contents[0], np.float32).tolist() == [4.0] * 4


def test_the_limit_is_a_flag(tmp_path: Path) -> None:
    server = start_server([build_repository(tmp_path / "models")], "--grpc-max-message-size=4096")
    try:
        error = rpc_error(lambda: raw_infer(channel(server.grpc_url), count_request(8192)))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "vs. 4096)" in str(error.details())
    finally:
        server.stop()
