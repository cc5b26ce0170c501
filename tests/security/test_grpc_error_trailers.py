"""Finding 6 on gRPC: an error text too long for a trailer is cut, not lost.

gRPC sends a status text in the ``grpc-message`` trailer, and clients refuse trailers over 8 KiB:
a request with 10,000 inputs, whose validation error listed every name, reached the client as
nothing but "Stream removed". Validation now lists a few names; whatever else echoes a long client
string (a 100,000-character model name here) is cut by the gRPC frontend to 4 KiB (as sent,
percent-encoded) with a note saying how much was left out, in the status and in a stream's
``error_message`` alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb

from naiad.grpc.status import MAX_DETAILS_BYTES, cut_details
from naiad.testing import ServerProcess, start_server

from .grpc_helpers import add_sub_request, build_repository, rpc_error, stub

NAMES = 10_000
LONG_NAME = "m" * 100_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("grpc-trailers") / "models")
    server = start_server([repository])
    yield server
    server.stop()


def _many_inputs() -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="add_sub", id="many")
    for index in range(NAMES):
        request.inputs.add(name=f"UNKNOWN_INPUT_{index:05d}", datatype="FP32", shape=[1])
        request.raw_input_contents.append(b"\0\0\0\0")
    return request


def _assert_cut(text: str) -> None:
    assert text.startswith("Request for unknown model: 'mmmm")
    assert text.endswith(" more characters]")
    assert "m... [error message cut: " in text
    assert MAX_DETAILS_BYTES - 64 < _as_sent(text) <= MAX_DETAILS_BYTES


def test_an_error_about_10000_inputs_reaches_the_client(server: ServerProcess) -> None:
    error = rpc_error(lambda: stub(server.grpc_url).ModelInfer(_many_inputs(), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT  # before: RESOURCE_EXHAUSTED "Stream removed"
    assert str(error.details()).startswith(f"[request id: many] expected 2 inputs but got {NAMES} inputs")
    assert _as_sent(str(error.details())) <= MAX_DETAILS_BYTES


def test_a_long_status_text_is_cut_to_fit_a_trailer(server: ServerProcess) -> None:
    error = rpc_error(lambda: stub(server.grpc_url).ModelInfer(pb.ModelInferRequest(model_name=LONG_NAME), timeout=30))
    assert error.code() == grpc.StatusCode.NOT_FOUND  # before: RESOURCE_EXHAUSTED "Stream removed"
    _assert_cut(str(error.details()))
    assert stub(server.grpc_url).ModelInfer(add_sub_request(1.0)).raw_output_contents


def test_a_long_stream_error_message_is_cut_and_the_stream_goes_on(server: ServerProcess) -> None:
    requests = [pb.ModelInferRequest(model_name=LONG_NAME, id="long"), add_sub_request(1.0, request_id="after")]
    refused, after = stub(server.grpc_url).ModelStreamInfer(iter(requests), timeout=30)
    assert refused.infer_response.id == "long"
    _assert_cut(refused.error_message)
    assert (after.infer_response.id, after.error_message) == ("after", "")


def _as_sent(text: str) -> int:
    """The length of ``text`` percent-encoded as gRPC sends grpc-message."""
    return sum(1 if 0x20 <= byte < 0x7F and byte != ord("%") else 3 for byte in text.encode())


def test_short_texts_are_kept_and_escaped_texts_are_measured_as_sent() -> None:
    assert cut_details("plain text") == "plain text"
    escaped = cut_details("é%\n" * 2000)  # every byte of these is sent as %XX
    assert escaped.startswith("é%\né%\n")
    assert escaped.endswith(" more characters]")
    assert MAX_DETAILS_BYTES - 12 < _as_sent(escaped) <= MAX_DETAILS_BYTES
