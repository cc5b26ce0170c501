"""ModelStreamInfer with tritonclient.grpc (sync and aio): ordering, decoupled models, errors.

Behaviour checked against Triton 2.51: non-decoupled answers come back in request order with
``triton_final_response=true``; a decoupled model's responses carry ``false`` and its flag-only
final is only sent (empty, with the request's id, model and version string) when the request
asked for it; errors arrive as error callbacks and the stream goes on.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TIMEOUT_S = 30


@dataclass
class Answer:
    """One stream callback: a result or an error."""

    result: grpcclient.InferResult | None
    error: InferenceServerException | None

    @property
    def response(self) -> Any:
        assert self.result is not None, self.error
        return self.result.get_response()

    @property
    def final(self) -> bool | None:
        parameters = self.response.parameters
        return parameters["triton_final_response"].bool_param if "triton_final_response" in parameters else None


class Stream:
    """A started tritonclient stream whose callbacks land in a queue."""

    def __init__(self, client: grpcclient.InferenceServerClient) -> None:
        self.client = client
        self.answers: queue.Queue[Answer] = queue.Queue()
        client.start_stream(callback=lambda result, error: self.answers.put(Answer(result, error)))

    def next(self) -> Answer:
        return self.answers.get(timeout=TIMEOUT_S)

    def take(self, count: int) -> list[Answer]:
        return [self.next() for _ in range(count)]

    def assert_quiet(self, seconds: float = 0.5) -> None:
        time.sleep(seconds)
        assert self.answers.empty(), self.answers.get()


@pytest.fixture
def stream(grpc_server: ServerProcess) -> Iterator[Stream]:
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    opened = Stream(client)
    yield opened
    client.stop_stream(cancel_requests=True)
    client.close()


def _add_sub(value: float) -> list[grpcclient.InferInput]:
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(np.full(4, value, dtype=np.float32))
    inputs[1].set_data_from_numpy(np.ones(4, dtype=np.float32))
    return inputs


def _repeat(count: int, delay: float = 0.0) -> list[grpcclient.InferInput]:
    inputs = [grpcclient.InferInput("IN", [1], "INT32"), grpcclient.InferInput("DELAY", [1], "FP32")]
    inputs[0].set_data_from_numpy(np.array([count], dtype=np.int32))
    inputs[1].set_data_from_numpy(np.array([delay], dtype=np.float32))
    return inputs


def _slow(sleep: float) -> tuple[list[grpcclient.InferInput], dict[str, Any]]:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([sleep], dtype=np.float32))
    return [tensor], {"sleep": sleep}


# -- models that are not decoupled ---------------------------------------------------------------


def test_one_final_response_per_request(stream: Stream) -> None:
    stream.client.async_stream_infer("add_sub", _add_sub(2.0), request_id="one")
    answer = stream.next()
    assert answer.response.id == "one"
    assert (answer.response.model_name, answer.response.model_version) == ("add_sub", "1")
    assert answer.final is True
    np.testing.assert_array_equal(answer.result.as_numpy("OUTPUT0"), np.full(4, 3, dtype=np.float32))
    np.testing.assert_array_equal(answer.result.as_numpy("OUTPUT1"), np.full(4, 1, dtype=np.float32))
    stream.assert_quiet(0.2)


def test_32_requests_in_flight_are_answered_in_request_order(stream: Stream) -> None:
    for index in range(32):
        stream.client.async_stream_infer("add_sub", _add_sub(float(index)), request_id=f"r{index}")
    answers = stream.take(32)
    assert [answer.response.id for answer in answers] == [f"r{index}" for index in range(32)]
    for index, answer in enumerate(answers):
        np.testing.assert_array_equal(answer.result.as_numpy("OUTPUT0"), np.full(4, index + 1, dtype=np.float32))
        np.testing.assert_array_equal(answer.result.as_numpy("OUTPUT1"), np.full(4, index - 1, dtype=np.float32))


def test_a_fast_request_waits_for_a_slow_one_sent_before(stream: Stream) -> None:
    inputs, parameters = _slow(0.5)
    stream.client.async_stream_infer("slow_identity", inputs, request_id="slow", parameters=parameters)
    stream.client.async_stream_infer("add_sub", _add_sub(1.0), request_id="fast")
    stream.client.async_stream_infer("no_such_model", _add_sub(1.0), request_id="bad")
    assert [answer.response.id if answer.result else "error" for answer in stream.take(3)] == [
        "slow",
        "fast",
        "error",
    ]


def test_enable_empty_final_response_changes_nothing_for_them(stream: Stream) -> None:
    stream.client.async_stream_infer("add_sub", _add_sub(0.0), request_id="x", enable_empty_final_response=True)
    assert stream.next().final is True
    stream.assert_quiet(0.2)


# -- decoupled models ------------------------------------------------------------------------------


def _outs(answers: list[Answer]) -> list[tuple[str, int, bool | None]]:
    return [(a.response.id, int(a.result.as_numpy("OUT")[0]), a.final) for a in answers]


def test_decoupled_sends_n_responses_without_a_final_response(stream: Stream) -> None:
    stream.client.async_stream_infer("repeat_int32", _repeat(3), request_id="three")
    answers = stream.take(3)
    assert _outs(answers) == [("three", 0, False), ("three", 1, False), ("three", 2, False)]
    assert {a.response.model_version for a in answers} == {"1"}
    np.testing.assert_array_equal(answers[0].result.as_numpy("IDX"), [3])
    stream.assert_quiet()


def test_decoupled_with_empty_final_response(stream: Stream) -> None:
    stream.client.async_stream_infer("repeat_int32", _repeat(2), request_id="two", enable_empty_final_response=True)
    answers = stream.take(3)
    assert _outs(answers[:2]) == [("two", 0, False), ("two", 1, False)]
    final = answers[2].response
    assert (final.id, final.model_name, final.model_version) == ("two", "repeat_int32", "")
    assert answers[2].final is True
    assert not final.outputs
    assert not final.raw_output_contents
    stream.assert_quiet(0.2)


def test_decoupled_without_responses(stream: Stream) -> None:
    stream.client.async_stream_infer("repeat_int32", _repeat(0), request_id="none")
    stream.assert_quiet()
    stream.client.async_stream_infer(
        "repeat_int32", _repeat(0), request_id="none-final", model_version="1", enable_empty_final_response=True
    )
    answer = stream.next()
    assert (answer.response.id, answer.response.model_version, answer.final) == ("none-final", "1", True)
    stream.assert_quiet(0.2)


def test_decoupled_requests_interleave_each_in_order(stream: Stream) -> None:
    stream.client.async_stream_infer("repeat_int32", _repeat(4, 0.15), request_id="A")
    stream.client.async_stream_infer("repeat_int32", _repeat(3, 0.1), request_id="B")
    answers = stream.take(7)
    for request_id, count in (("A", 4), ("B", 3)):
        mine = [out for rid, out, _ in _outs(answers) if rid == request_id]
        assert mine == list(range(count))


def test_decoupled_error_response(stream: Stream) -> None:
    stream.client.async_stream_infer("repeat_int32", _repeat(-1), request_id="neg", enable_empty_final_response=True)
    error, final = stream.take(2)
    assert error.result is None
    assert error.error is not None
    assert error.error.message() == "negative count -1"
    assert (final.response.id, final.final) == ("neg", True)


def test_closing_the_stream_waits_for_in_flight_responses(grpc_server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    stream = Stream(client)
    client.async_stream_infer("repeat_int32", _repeat(3, 0.2), request_id="late", enable_empty_final_response=True)
    client.stop_stream()  # half-closes: the server answers everything, then ends the call
    answers = [stream.answers.get_nowait() for _ in range(stream.answers.qsize())]
    assert [(a.response.id, a.final) for a in answers] == [("late", False)] * 3 + [("late", True)]
    client.close()


# -- errors inside the stream ----------------------------------------------------------------------


def test_setup_errors_do_not_end_the_stream(stream: Stream) -> None:
    stream.client.async_stream_infer("no_such_model", _add_sub(1.0), request_id="u1")
    stream.client.async_stream_infer("add_sub", _add_sub(1.0), model_version="7", request_id="u2")
    wrong = _add_sub(1.0)[:1]
    stream.client.async_stream_infer("add_sub", wrong, request_id="u3")
    stream.client.async_stream_infer("add_sub", _add_sub(1.0), request_id="ok")
    answers = stream.take(4)
    assert [a.error.message() if a.error else a.response.id for a in answers] == [
        "Request for unknown model: 'no_such_model' is not found",
        "Request for unknown model: 'add_sub' version 7 is not found",
        "[request id: u3] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], "
        "but missing required input(s) ['INPUT1']. Please provide all required input(s).",
        "ok",
    ]


def test_error_in_execute_does_not_end_the_stream(stream: Stream) -> None:
    tensor = grpcclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    stream.client.async_stream_infer("raises_in_execute", [tensor], request_id="boom")
    stream.client.async_stream_infer("add_sub", _add_sub(1.0), request_id="after")
    error, after = stream.take(2)
    assert error.error is not None
    assert error.error.message().startswith(
        "Failed to process the request(s) for model 'raises_in_execute_0', message: ValueError"
    )
    assert after.response.id == "after"


def test_strict_mode_ends_the_stream_on_a_failed_request(grpc_server: ServerProcess) -> None:
    """Triton's ``triton_grpc_error: true``: a request that fails while it runs ends the call with
    the error's status; one that cannot start still answers in ``error_message``."""
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    answers: queue.Queue[Answer] = queue.Queue()
    client.start_stream(
        callback=lambda result, error: answers.put(Answer(result, error)), headers={"triton_grpc_error": "true"}
    )
    try:
        client.async_stream_infer("no_such_model", _add_sub(1.0), request_id="u1")
        refused = answers.get(timeout=TIMEOUT_S)
        assert refused.error is not None
        assert refused.error.status() is None  # a message: the call goes on
        client.async_stream_infer("add_sub", _add_sub(1.0), request_id="ok")
        assert answers.get(timeout=TIMEOUT_S).response.id == "ok"
        tensor = grpcclient.InferInput("INPUT0", [2], "FP32")
        tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
        client.async_stream_infer("raises_in_execute", [tensor], request_id="boom")
        ended = answers.get(timeout=TIMEOUT_S)
        assert ended.error is not None
        assert ended.error.status() == "StatusCode.INTERNAL"  # the call's own status
        assert ended.error.message().startswith(
            "Failed to process the request(s) for model 'raises_in_execute_0', message: ValueError"
        )
    finally:
        client.stop_stream()
        client.close()


# -- tritonclient.grpc.aio ---------------------------------------------------------------------------


def test_aio_stream(grpc_server: ServerProcess) -> None:
    """The aio client cannot ask for empty finals; the call ends once every request is answered."""

    async def requests() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": "add_sub", "inputs": _add_sub(5.0), "request_id": "plain"}
        yield {"model_name": "repeat_int32", "inputs": _repeat(2, 0.1), "request_id": "dec"}
        yield {"model_name": "no_such_model", "inputs": _add_sub(5.0), "request_id": "bad"}

    async def run() -> list[tuple[str, bool | None, int]]:
        seen: list[tuple[str, bool | None, int]] = []
        async with aioclient.InferenceServerClient(grpc_server.grpc_url) as client:
            async for result, error in client.stream_infer(requests(), stream_timeout=TIMEOUT_S):
                if error is not None:
                    seen.append((error.message(), None, 0))
                    continue
                answer = Answer(result, None)
                seen.append((answer.response.id, answer.final, len(answer.response.outputs)))
        return seen

    seen = asyncio.run(run())
    in_order = [entry for entry in seen if entry[0] != "dec"]  # not decoupled: request order
    assert in_order == [("plain", True, 2), ("Request for unknown model: 'no_such_model' is not found", None, 0)]
    assert [entry for entry in seen if entry[0] == "dec"] == [("dec", False, 2), ("dec", False, 2)]
