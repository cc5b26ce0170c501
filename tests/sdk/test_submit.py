"""Submitting requests from anywhere: worker threads, callbacks, coroutines, with any sink.

Two identity models (naiad's built-in ``identity`` backend) served by the real server in this process;
requests go in through :class:`naiad.backend.ServerHandle`, as a backend calling another model does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.backend import (
    BlockingSink,
    CallbackSink,
    CancellationToken,
    ErrorCode,
    InferenceResponse,
    LoopSink,
    NaiadError,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    Scheduling,
    Tensor,
)
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

from .backends import IDENTITY_CONFIG, SPACED_CONFIG, SpacedBackend

TIMEOUT_S = 10


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("submit") / "models")
    repository.add_model("first", IDENTITY_CONFIG.format(extra=""), {"1/.keep": ""})
    slow = 'parameters { key: "execute_delay_ms" value: { string_value: "200" } }'
    repository.add_model("slow", IDENTITY_CONFIG.format(extra=slow), {"1/.keep": ""})
    repository.add_model("batched", SPACED_CONFIG, {"1/.keep": ""})
    with serve_in_thread([repository.root], plugins={"spaced": SpacedBackend()}) as server:
        yield server


def _row(*values: float) -> list[Tensor]:
    return [Tensor("INPUT0", "FP32", np.array([values], dtype=np.float32))]


def _output(response: InferenceResponse) -> list[float]:
    assert response.error is None, response.error
    (tensor,) = response.outputs
    return [float(value) for value in tensor.numpy().reshape(-1)]


def test_worker_threads_infer_and_block_for_the_answer(served: ThreadedServer) -> None:
    def ask(value: int) -> list[float]:
        return _output(served.handle.infer("first", _row(value, value + 1), timeout=TIMEOUT_S))

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(32)))
    assert answers == [[float(value), float(value + 1)] for value in range(32)]


def test_a_callback_feeds_the_next_model_on_the_sending_thread(served: ThreadedServer) -> None:
    """An ensemble-style chain: first's response submits to slow from first's worker thread, no loop hop."""
    done = threading.Event()
    seen: dict[str, object] = {}

    def second(event: ResponseEvent) -> None:
        assert event.response is not None
        seen["result"] = _output(event.response)
        seen["second_thread"] = threading.current_thread().name
        done.set()

    def first(event: ResponseEvent) -> None:
        assert event.response is not None
        seen["first_thread"] = threading.current_thread().name
        outputs = event.response.outputs
        served.handle.submit("slow", [Tensor("INPUT0", "FP32", outputs[0].numpy() * 2)], CallbackSink(second))

    served.handle.submit("first", _row(1.5, 2.5), CallbackSink(first))
    assert done.wait(TIMEOUT_S)
    assert seen["result"] == [3.0, 5.0]
    assert seen["first_thread"] == "naiad-first_0"  # the worker that executed first
    assert seen["second_thread"] == "naiad-slow_0"


def test_coroutines_on_the_server_loop_await_without_blocking_it(served: ThreadedServer) -> None:
    async def both() -> tuple[InferenceResponse, InferenceResponse]:
        return await asyncio.gather(
            served.handle.infer_async("slow", _row(1.0)), served.handle.infer_async("first", _row(2.0))
        )

    slow, fast = asyncio.run_coroutine_threadsafe(both(), served.handle.loop).result(TIMEOUT_S)
    assert (_output(slow), _output(fast)) == ([1.0], [2.0])


def test_infer_on_the_loop_thread_is_refused(served: ThreadedServer) -> None:
    async def blocking() -> None:
        served.handle.infer("first", _row(1.0))

    with pytest.raises(NaiadError, match="would block the server's event loop"):
        asyncio.run_coroutine_threadsafe(blocking(), served.handle.loop).result(TIMEOUT_S)


def test_refusals_raise_before_anything_is_queued(served: ThreadedServer) -> None:
    with pytest.raises(NaiadError) as unknown:
        served.handle.submit("missing", _row(1.0), BlockingSink())
    assert unknown.value.code is ErrorCode.NOT_FOUND
    with pytest.raises(NaiadError) as invalid:
        served.handle.submit("first", [Tensor("INPUT0", "INT32", np.ones((1, 1), dtype=np.int32))], BlockingSink())
    assert invalid.value.code is ErrorCode.INVALID_ARG
    assert "data-type is 'INT32'" in invalid.value.message


def test_scheduling_travels_apart_from_parameters_and_wrong_types_are_refused(served: ThreadedServer) -> None:
    parameters = {"priority": 3, "sequence_id": 7, "k": "v"}
    request = served.handle.submit(
        "first", _row(1.0), BlockingSink(), parameters=parameters, scheduling=Scheduling("s-1", 1, 0, 5000)
    )
    assert (request.correlation_id, request.flags, request.priority, request.timeout_us) == ("s-1", 1, 0, 5000)
    assert request.parameters == parameters
    frontend_like = served.handle.submit("first", _row(1.0), BlockingSink(), parameters=parameters)
    assert (frontend_like.correlation_id, frontend_like.priority, frontend_like.parameters) == (7, 3, {"k": "v"})
    for wrong, message in (
        (Scheduling(timeout_us=-1), "request timeout must be an unsigned integer, got -1"),
        (Scheduling(correlation_id=1.5), "request correlation id must be an unsigned integer or a string, got 1.5"),  # type: ignore[arg-type]
    ):
        with pytest.raises(NaiadError) as refused:
            served.handle.submit("first", _row(1.0), BlockingSink(), scheduling=wrong)
        assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_ARG, message)


def test_a_shared_token_cancels_a_queued_child_request(served: ThreadedServer) -> None:
    parent = CancellationToken()
    heard: list[str] = []
    parent.add_callback(lambda: heard.append("parent cancelled"))
    busy, queued = BlockingSink(), BlockingSink()
    served.handle.submit("slow", _row(1.0), busy)  # occupies the one instance for 200 ms
    child = served.handle.submit("slow", _row(2.0), queued, cancellation=parent)
    assert child.cancellation is parent
    parent.cancel()
    assert heard == ["parent cancelled"]
    event = queued.next_event(TIMEOUT_S)
    assert event.response is not None
    assert event.response.error is not None
    assert event.response.error.code is ErrorCode.CANCELLED
    assert _output(busy.response(TIMEOUT_S)) == [1.0]


class BufferDestination:
    """A caller-owned buffer the response pipeline copies an output into."""

    def __init__(self, size: int) -> None:
        self.buffer = bytearray(size)

    def write(self, tensor: Tensor) -> None:
        data = np.ascontiguousarray(tensor.numpy()).tobytes()
        if len(data) > len(self.buffer):
            raise NaiadError(f"output '{tensor.name}' needs {len(data)} bytes; the buffer holds {len(self.buffer)}")
        self.buffer[: len(data)] = data

    def parameters(self) -> Mapping[str, ParameterValue]:
        return {"byte_size": len(self.buffer)}


def test_outputs_with_a_destination_are_written_there(served: ThreadedServer) -> None:
    destination = BufferDestination(8)
    output = RequestedOutput("OUTPUT0", destination=destination)
    response = served.handle.infer("first", _row(3.0, 4.0), outputs=[output], timeout=TIMEOUT_S)
    assert _output(response) == [3.0, 4.0]
    assert np.frombuffer(bytes(destination.buffer), dtype=np.float32).tolist() == [3.0, 4.0]
    too_small = RequestedOutput("OUTPUT0", destination=BufferDestination(4))
    with pytest.raises(NaiadError, match="needs 8 bytes; the buffer holds 4"):
        served.handle.infer("first", _row(3.0, 4.0), outputs=[too_small], timeout=TIMEOUT_S)


def test_a_batch_of_responses_wakes_the_loop_once(served: ThreadedServer) -> None:
    """Eight requests batched into one execution, answered a millisecond apart, reach the event loop with one
    wake-up, not eight."""
    loop, inbox = served.handle.loop, served.handle.inbox
    sinks = [LoopSink(inbox) for _ in range(8)]
    with mock.patch.object(loop, "call_soon_threadsafe", wraps=loop.call_soon_threadsafe) as wake:
        for index, sink in enumerate(sinks):
            served.handle.submit("batched", [Tensor("IN", "FP32", np.array([[index]], dtype=np.float32))], sink)
        drained = asyncio.run_coroutine_threadsafe(asyncio.wait_for(_finals(sinks), TIMEOUT_S), loop).result()
        drains = [call for call in wake.call_args_list if call.args and call.args[0] == inbox._drain]
    assert drained == 8
    assert len(drains) == 1


async def _finals(sinks: list[LoopSink]) -> int:
    return sum([(await sink.next_event()).final for sink in sinks])


def test_requests_from_every_source_share_the_models(served: ThreadedServer) -> None:
    """A frontend request and in-process ones interleave on the same scheduler and statistics."""
    client = httpclient.InferenceServerClient(served.http_url)
    before = client.get_inference_statistics("first")["model_stats"][0]["inference_stats"]["success"]["count"]
    tensor = httpclient.InferInput("INPUT0", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1), dtype=np.float32))
    client.infer("first", [tensor])
    served.handle.infer("first", _row(1.0), timeout=TIMEOUT_S)
    after = client.get_inference_statistics("first")["model_stats"][0]["inference_stats"]["success"]["count"]
    assert int(after) == int(before) + 2
