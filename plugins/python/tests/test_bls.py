"""BLS from python models in the real server, driven by Triton's HTTP and gRPC clients.

One server runs the callers of ``bls_models.py`` next to their callees; every test asks it over both
protocols unless it tests one protocol's own way of cancelling, and runs twice: with the models in the
server process and in worker processes.
"""

from __future__ import annotations

import contextvars
import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from naiad.backend import InferenceRequest as CoreRequest
from naiad.backend import ResponseSender, Tensor
from naiad.testing import ThreadedServer, serve_in_thread
from naiad_python import origin

from .bls_models import (
    ADDRESS,
    BLS_ERRORS,
    CALL_ADD_SUB,
    CALL_REPEAT,
    CALL_REPEAT_ASYNC,
    CALL_REQUEST_ECHO,
    CALL_SLEEPER,
    GATHER_SLEEPS,
    LATE_CALLER,
    RAISES,
    REJECTS,
    REQUEST_ECHO,
    SLEEPER,
    ZERO_COPY,
    relay,
)
from .models import ADD_SUB, DECOUPLED_REPEAT, PythonModelSpec, isolated, write_model

TIMEOUT_S = 10.0
ONES = np.ones(4, np.float32)
RANGE = np.arange(4, dtype=np.float32)


@pytest.fixture(scope="module", params=["thread", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    """Where the models run: in the server process or in worker processes."""
    mode: str = request.param
    return mode


def _two_instances(spec: PythonModelSpec) -> PythonModelSpec:
    assert spec.config is not None
    return replace(spec, config=textwrap.dedent(spec.config) + "\ninstance_group [ { kind: KIND_CPU count: 2 } ]\n")


@pytest.fixture(scope="module")
def server(isolation: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repo: Path = tmp_path_factory.mktemp("models")
    for name, spec in {
        "add_sub": ADD_SUB,
        "repeat": DECOUPLED_REPEAT,
        "sleeper": SLEEPER,
        "address": ADDRESS,
        "raises": RAISES,
        "rejects": REJECTS,
        "call_add_sub": CALL_ADD_SUB,
        "gather_sleeps": GATHER_SLEEPS,
        "call_repeat": CALL_REPEAT,
        "call_repeat_async": CALL_REPEAT_ASYNC,
        "bls_errors": BLS_ERRORS,
        "call_sleeper": CALL_SLEEPER,
        "ping": relay("pong"),
        "pong": relay("ping"),
        "self_caller": relay("self_caller"),
        "self_pair": _two_instances(relay("self_pair")),
        "zero_copy": ZERO_COPY,
        "request_echo": REQUEST_ECHO,
        "call_request_echo": CALL_REQUEST_ECHO,
    }.items():
        write_model(repo, name, isolated(spec, isolation))
    with serve_in_thread([repo]) as running:
        yield running


class Client:
    """One of Triton's clients (``http`` or ``grpc``) of the module's server."""

    def __init__(self, protocol: str, server: ThreadedServer) -> None:
        self.protocol = protocol
        self.module: Any = httpclient if protocol == "http" else grpcclient
        self.client: Any = self.module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)

    def inputs(self, **arrays: npt.NDArray[Any]) -> list[Any]:
        tensors = []
        for name, array in arrays.items():
            tensor = self.module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        return tensors

    def infer(self, model: str, **arrays: npt.NDArray[Any]) -> Any:
        return self.client.infer(model, self.inputs(**arrays))

    def successes(self, model: str) -> int:
        """The model's successful requests, from the statistics extension."""
        return self._count(model, "success")

    def _count(self, model: str, outcome: str) -> int:
        if self.protocol == "http":
            stats = self.client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
            return int(stats[outcome]["count"])
        stats = self.client.get_inference_statistics(model).model_stats[0].inference_stats
        return int(getattr(stats, outcome).count)


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: ThreadedServer) -> Iterator[Client]:
    made = Client(request.param, server)
    yield made
    made.client.close()


def _error_case(client: Client, case: str) -> tuple[str, str, int]:
    result = client.infer("bls_errors", CASE=np.array([case.encode()], np.object_))
    return (
        result.as_numpy("ERROR")[0].decode(),
        result.as_numpy("CODE")[0].decode(),
        int(result.as_numpy("COUNT")[0]),
    )


def _eventually(condition: Callable[[], bool], timeout: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_exec_runs_another_model_and_counts_in_its_statistics(client: Client) -> None:
    callee_before, caller_before = client.successes("add_sub"), client.successes("call_add_sub")
    for _ in range(3):
        result = client.infer("call_add_sub", INPUT0=RANGE, INPUT1=ONES)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), RANGE + 1)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), RANGE - 1)
    assert _eventually(lambda: client.successes("add_sub") == callee_before + 3)
    assert _eventually(lambda: client.successes("call_add_sub") == caller_before + 3)


def test_the_callee_sees_the_bls_parameters_as_given_and_the_sequence_and_timeout_apart(client: Client) -> None:
    # As in Triton, a BLS request's parameters are all the callee's, also those named like the
    # reserved ones a frontend request's parameters take (sequence_id, priority, timeout, ...).
    result = client.infer("call_request_echo", DATA=ONES)
    assert json.loads(result.as_numpy("SEEN")[0]) == {
        "correlation_id": 42,
        "flags": 1,
        "timeout": 123,
        "parameters": {
            "priority": 1,
            "timeout": 5,
            "sequence_id": 7,
            "sequence_end": True,
            "binary_data_output": True,
            "triton_x": 1,
            "k": "v",
        },
    }


def test_a_client_requests_reserved_parameters_set_its_scheduling_and_never_reach_the_model(client: Client) -> None:
    inputs = client.inputs(DATA=ONES)
    result = client.client.infer(
        "request_echo", inputs, sequence_id=9, sequence_start=True, priority=1, timeout=10**7, parameters={"k": "v"}
    )
    seen = json.loads(result.as_numpy("SEEN")[0])
    assert seen == {"correlation_id": 9, "flags": 1, "timeout": 10**7, "parameters": {"k": "v"}}


def test_async_exec_calls_awaited_together_run_concurrently(client: Client) -> None:
    result = client.infer("gather_sleeps", MS=np.array([200], np.int32))
    np.testing.assert_array_equal(result.as_numpy("SLEPT"), [200, 200])
    assert 0.2 <= float(result.as_numpy("ELAPSED")[0]) < 0.35  # two 200 ms calls, at the same time


@pytest.mark.parametrize("model", ["call_repeat", "call_repeat_async"])
def test_decoupled_exec_iterates_every_response_then_the_empty_last(client: Client, model: str) -> None:
    result = client.infer(model, IN=np.array([7, 8, 9], np.int32))
    np.testing.assert_array_equal(result.as_numpy("VALUES"), [7, 8, 9])
    # three responses and the flag-only final as an empty last response; iterating again replays them
    np.testing.assert_array_equal(result.as_numpy("COUNTS"), [4, 4, 1])


def test_errors_come_back_as_responses_with_tritons_text(client: Client, server: ThreadedServer) -> None:
    assert _error_case(client, "unknown") == (
        "Model missing - Error when running inference: Failed for execute the inference request. Model 'missing' "
        "is not ready.",
        "INTERNAL",  # Triton's code for every refused BLS request
        1,
    )
    assert _error_case(client, "unknown_decoupled")[1:] == ("INTERNAL", 1)  # one error response, then the end
    assert _error_case(client, "bad_input") == (
        "Model add_sub - Error when running inference: [request id: <id_unknown>] expected 2 inputs but got 1 "
        "inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please "
        "provide all required input(s).",
        "INTERNAL",
        1,
    )
    assert _error_case(client, "duplicate_input") == (
        "Model add_sub - Error when running inference: [request id: <id_unknown>] input 'INPUT0' already exists "
        "in request",
        "INTERNAL",
        1,
    )
    raises_file = server.server.options.model_repositories[0] / "raises" / "1" / "model.py"
    assert _error_case(client, "raises") == (
        "Failed to process the request(s) for model 'raises_0', message: ValueError: cannot handle this input"
        f"\n\nAt:\n  {raises_file}(3): execute\n",
        "INTERNAL",
        1,
    )
    assert _error_case(client, "rejects") == ("no such item", "INTERNAL", 1)  # the callee said NOT_FOUND
    assert _error_case(client, "decoupled") == (
        "Model repeat - Error when running inference: Model repeat is using the decoupled. The current BLS request "
        "call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument "
        "to the 'exec' or 'async_exec' calls for decoupled models.'",
        "INTERNAL",
        1,
    )
    assert _error_case(client, "init") == ("BLS is only supported during the 'execute' function.", "", 0)


def test_names_may_be_bytes_as_triton_takes_them(client: Client) -> None:
    assert _error_case(client, "named_by_bytes") == ("no error", "", 1)


def test_a_request_refused_at_construction_leaves_the_next_call_working(client: Client) -> None:
    for _ in range(3):
        assert _error_case(client, "refused_then_served") == ("no error", "", 1)


@pytest.mark.parametrize("case", ["timeout", "timeout_async"])
def test_a_timeout_bounds_the_queue_not_the_call(client: Client, case: str) -> None:
    # as in Triton: the callee (no queue policy) runs its 300 ms past the caller's 50 ms timeout
    successes_before = client.successes("sleeper")
    started = time.monotonic()
    assert _error_case(client, case) == ("no error", "", 1)
    assert time.monotonic() - started >= 0.3
    assert _eventually(lambda: client.successes("sleeper") == successes_before + 1)


def test_a_caller_that_gives_up_cancels_the_call(client: Client) -> None:
    served_before = client.successes("sleeper")
    started = time.monotonic()
    assert _error_case(client, "given_up") == ("gave up", "INTERNAL", 1)  # asyncio.wait_for's 0.1 s passed
    assert time.monotonic() - started < 1.5  # the callee was asked for 3 s
    # It saw the cancellation and answered CANCELLED at once (a request it answered counts as served,
    # as in Triton), long before its 3 s.
    assert _eventually(lambda: client.successes("sleeper") == served_before + 1)
    assert time.monotonic() - started < 2.5


def test_a_cycle_is_refused_instead_of_deadlocking(client: Client) -> None:
    message, code, _ = _error_case(client, "self")
    assert code == "INTERNAL"
    assert message.startswith(
        "Model bls_errors - Error when running inference: request cycle: model 'bls_errors' -> 'bls_errors'"
    )
    with pytest.raises(InferenceServerException) as self_call:
        client.infer("self_caller", X=ONES)
    assert "request cycle: model 'self_caller' -> 'self_caller'" in str(self_call.value.message())
    with pytest.raises(InferenceServerException) as deeper:  # its first call to itself ran on its other instance
        client.infer("self_pair", X=ONES)
    assert (
        "request cycle: model 'self_pair' -> 'self_pair' -> 'self_pair'; every instance of model 'self_pair' (2)"
        in str(deeper.value.message())
    )
    with pytest.raises(InferenceServerException) as cycle:
        client.infer("ping", X=ONES)
    assert "Model ping - Error when running inference: request cycle: model 'ping' -> 'pong' -> 'ping'" in str(
        cycle.value.message()
    )
    assert cycle.value.status() == ("500" if client.protocol == "http" else "StatusCode.INTERNAL")


def test_bls_outputs_pass_on_without_a_copy(server: ThreadedServer, client: Client, isolation: str) -> None:
    result = client.infer("zero_copy", INPUT0=RANGE, INPUT1=ONES)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), RANGE + 1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), RANGE - 1)
    caller, callee = result.as_numpy("ADDRESSES")
    if isolation == "process":  # from a worker, tensors cross by shared memory: a copy each way
        assert caller != callee
        return
    assert caller == callee  # the tensor went on to "address" as the same buffer
    # in-process, the response carries the very buffer add_sub produced and zero_copy passed on
    response = server.handle.infer("zero_copy", [Tensor("INPUT0", "FP32", RANGE), Tensor("INPUT1", "FP32", ONES)])
    outputs = {tensor.name: tensor.numpy() for tensor in response.outputs}
    assert outputs["OUTPUT0"].ctypes.data == outputs["ADDRESSES"][0] == outputs["ADDRESSES"][1]


def test_a_grpc_cancel_cancels_the_bls_calls_made_for_the_request(server: ThreadedServer) -> None:
    grpc, stats = Client("grpc", server), Client("http", server)
    try:
        served_before = stats.successes("sleeper")  # it answers CANCELLED, which counts as served
        answers: list[Any] = []
        call = grpc.client.async_infer(
            "call_sleeper",
            grpc.inputs(MS=np.array([5000], np.int32)),
            callback=lambda result, error: answers.append(error),
        )
        time.sleep(0.3)
        cancelled_at = time.monotonic()
        call.cancel()
        assert _eventually(lambda: stats.successes("sleeper") == served_before + 1)
        assert time.monotonic() - cancelled_at < 2  # the 5 s sleep stopped
        assert _eventually(lambda: len(answers) == 1)
        assert "CANCELLED" in str(answers[0])
    finally:
        grpc.client.close()
        stats.client.close()


def test_an_http_disconnect_cancels_the_bls_calls_made_for_the_request(server: ThreadedServer) -> None:
    stats = Client("http", server)
    impatient = httpclient.InferenceServerClient(server.http_url, network_timeout=0.3)
    try:
        served_before = stats.successes("sleeper")  # it answers CANCELLED, which counts as served
        with pytest.raises(TimeoutError):
            impatient.infer("call_sleeper", stats.inputs(MS=np.array([5000], np.int32)))
        gone_at = time.monotonic()
        impatient.close()
        assert _eventually(lambda: stats.successes("sleeper") == served_before + 1)
        assert time.monotonic() - gone_at < 2
    finally:
        stats.client.close()


def test_bls_calls_of_a_request_in_flight_run_while_the_server_shuts_down(tmp_path: Path) -> None:
    write_model(tmp_path, "add_sub", ADD_SUB)
    write_model(tmp_path, "late_caller", LATE_CALLER)
    with serve_in_thread([tmp_path]) as running:
        client = Client("grpc", running)
        answers: list[Any] = []
        client.client.async_infer(
            "late_caller",
            client.inputs(INPUT0=RANGE, INPUT1=ONES),
            callback=lambda result, error: answers.append(error or result.as_numpy("OUTPUT0")),
        )
        time.sleep(0.1)  # the model is waiting before its BLS call
        running.handle.loop.call_soon_threadsafe(running.server.request_stop)
        assert _eventually(lambda: len(answers) == 1)
        client.client.close()
    np.testing.assert_array_equal(answers[0], RANGE + 1)


def _request(model: str, *lineage: str) -> CoreRequest:
    return CoreRequest(model, 1, {}, {}, ResponseSender(lambda event: None), lineage=lineage)


def test_the_bls_parent_of_a_batch_is_cancelled_once_all_its_requests_are() -> None:
    first, second = _request("caller", "a", "b"), _request("caller", "c", "a")
    with origin.serving([first, second]):
        parent = origin.current_parent()
    assert parent is not None
    assert (parent.model_name, parent.lineage) == ("caller", ("a", "b", "c"))
    first.cancel()
    assert not parent.is_cancelled()
    second.cancel()
    assert parent.is_cancelled()


def test_the_bls_parent_of_a_single_request_is_that_request_and_follows_the_context() -> None:
    request = _request("caller")
    seen: list[CoreRequest | None] = []

    def look() -> None:
        seen.append(origin.current_parent())

    with origin.serving([request]):
        assert origin.current_parent() is request
        for thread in (
            threading.Thread(target=look),  # a plain thread starts without the context
            threading.Thread(target=contextvars.copy_context().run, args=(look,)),
        ):
            thread.start()
            thread.join()
    assert seen == [None, request]
    assert origin.current_parent() is None
