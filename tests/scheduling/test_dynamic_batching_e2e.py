"""The dynamic batcher and instance groups, end to end with the real tritonclient."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

# Sleeps SLEEP seconds per execute (from the config; -1: as many seconds as its first input
# value), doubles its input, and appends one line per execute to <model dir>/log.txt: the
# request ids of the batch, space-separated.
RECORDER = """
import json
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.sleep = float(config["parameters"]["SLEEP"]["string_value"])
        self.log = Path(args["model_repository"]) / "log.txt"

    def execute(self, requests):
        with self.log.open("a") as log:
            log.write(" ".join(r.request_id() for r in requests) + "\\n")
        time.sleep(self.sleep if self.sleep >= 0 else float(requests[0].inputs()[0].as_numpy().max()))
        outputs = [pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * 2) for r in requests]
        return [pb_utils.InferenceResponse([output]) for output in outputs]
"""


def recorder_config(batching: str, *, sleep: float, max_batch_size: int = 8, instances: int = 1) -> str:
    return f"""
        backend: "python"
        max_batch_size: {max_batch_size}
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
        parameters {{ key: "SLEEP" value: {{ string_value: "{sleep}" }} }}
        {batching}
    """


def executed(repository: ModelRepositoryBuilder, model: str) -> list[list[str]]:
    lines = (repository.root / model / "log.txt").read_text().splitlines()
    return [line.split() for line in lines]


def _infer(
    server: ServerProcess, model: str, value: float, request_id: str, priority: int = 0, timeout_us: int | None = None
) -> np.ndarray:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    tensor = httpclient.InferInput("IN", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.float32))
    try:
        result = client.infer(model, [tensor], request_id=request_id, priority=priority, timeout=timeout_us)
        return result.as_numpy("OUT")
    finally:
        client.close()


def _in_threads(calls: list[Callable[[], object]], stagger: float = 0.0) -> list[object]:
    results: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except InferenceServerException as error:
            results[index] = error

    threads = []
    for index in range(len(calls)):
        thread = threading.Thread(target=run, args=(index,))
        thread.start()
        threads.append(thread)
        time.sleep(stagger)
    for thread in threads:
        thread.join(60)
    return results


@pytest.fixture
def start(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> Callable[..., ServerProcess]:
    def start_with(models: dict[str, str], *args: str) -> ServerProcess:
        for name, config in models.items():
            model_repository.add_python_model(name, RECORDER, config)
        return naiad_server(model_repository.root, args=args)

    return start_with


def test_concurrent_requests_are_batched_and_answered_correctly(
    start: Callable[..., ServerProcess], model_repository: ModelRepositoryBuilder
) -> None:
    server = start(
        {"batched": recorder_config("dynamic_batching { max_queue_delay_microseconds: 100000 }", sleep=0.05)}
    )
    results = _in_threads([lambda i=i: _infer(server, "batched", float(i), f"r{i}") for i in range(16)])
    for index, result in enumerate(results):
        np.testing.assert_array_equal(result, [[2.0 * index]])
    batches = executed(model_repository, "batched")
    assert sorted(request for batch in batches for request in batch) == sorted(f"r{i}" for i in range(16))
    assert len(batches) < 16
    assert max(len(batch) for batch in batches) <= 8


def test_preserve_ordering_holds_back_later_responses(start: Callable[..., ServerProcess]) -> None:
    server = start(
        {
            name: recorder_config(batching, sleep=-1, max_batch_size=1, instances=2)
            for name, batching in (
                ("ordered", "dynamic_batching { preserve_ordering: true }"),
                ("unordered", "dynamic_batching { }"),
            )
        }
    )
    finished: dict[str, float] = {}

    def timed(model: str, seconds: float, request_id: str) -> None:
        _infer(server, model, seconds, request_id)
        finished[request_id] = time.monotonic()

    # The first request runs 0.8 s, the second 0.05 s on the other instance at the same time.
    for model in ("ordered", "unordered"):
        _in_threads([lambda m=model: timed(m, 0.8, f"{m}-slow"), lambda m=model: timed(m, 0.05, f"{m}-fast")], 0.1)
    # Ordered: the fast response waits for the slow one; unordered: it comes back long before.
    assert finished["ordered-fast"] > finished["ordered-slow"] - 0.1
    assert finished["unordered-fast"] < finished["unordered-slow"] - 0.4


def test_higher_priority_requests_run_first_under_load(
    start: Callable[..., ServerProcess], model_repository: ModelRepositoryBuilder
) -> None:
    batching = "dynamic_batching { priority_levels: 2 default_priority_level: 2 }"
    server = start({"prio": recorder_config(batching, sleep=0.3, max_batch_size=1)})
    calls: list[Callable[[], object]] = [lambda: _infer(server, "prio", 0.0, "blocker")]
    calls += [lambda i=i: _infer(server, "prio", 1.0, f"low{i}", priority=2) for i in range(3)]
    calls += [lambda: _infer(server, "prio", 2.0, "high", priority=1)]
    _in_threads(calls, stagger=0.05)
    order = [batch[0] for batch in executed(model_repository, "prio")]
    assert order[0] == "blocker"
    assert order[1] == "high"
    assert sorted(order[2:]) == ["low0", "low1", "low2"]


def test_queue_timeout_fires_while_a_long_batch_runs(start: Callable[..., ServerProcess]) -> None:
    batching = (
        "dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 200000 } }"
    )
    server = start({"timed": recorder_config(batching, sleep=1.5, max_batch_size=1)})
    began = time.monotonic()
    results = _in_threads(
        [
            lambda: _infer(server, "timed", 1.0, "runs"),
            lambda: (_infer(server, "timed", 1.0, "waits"), time.monotonic())[1],
        ],
        stagger=0.1,
    )
    error = results[1]
    assert isinstance(error, InferenceServerException)
    assert error.status() == "503"
    assert error.message() == "Request timeout expired"
    np.testing.assert_array_equal(results[0], [[2.0]])
    assert time.monotonic() - began >= 1.5


def test_a_timeout_of_millennia_leaves_the_others_on_time(start: Callable[..., ServerProcess]) -> None:
    """A request that asks for a timeout of 2**62 µs waits its turn, and the queue keeps timing out
    the others on time (worker threads: ``test_queue_timeouts.py``)."""
    batching = "dynamic_batching { default_queue_policy { timeout_action: REJECT allow_timeout_override: true } }"
    server = start({"overridden": recorder_config(batching, sleep=-1, max_batch_size=1)})
    began = time.monotonic()
    refused_after: list[float] = []

    def waits_briefly() -> None:
        try:
            _infer(server, "overridden", 0.0, "waits briefly", timeout_us=200_000)
        finally:
            refused_after.append(time.monotonic() - began)

    results = _in_threads(
        [
            lambda: _infer(server, "overridden", 2.0, "runs"),
            lambda: _infer(server, "overridden", 0.0, "waits long", timeout_us=2**62),
            waits_briefly,
        ],
        stagger=0.2,
    )
    error = results[2]
    assert isinstance(error, InferenceServerException)
    assert (error.status(), error.message()) == ("503", "Request timeout expired")
    assert refused_after[0] < 1.5  # while the first request still runs
    np.testing.assert_array_equal(results[1], [[0.0]])


def test_full_queue_is_refused_at_once(start: Callable[..., ServerProcess]) -> None:
    batching = "dynamic_batching { default_queue_policy { max_queue_size: 1 } }"
    server = start({"small_queue": recorder_config(batching, sleep=1.0, max_batch_size=1)})
    results = _in_threads([lambda i=i: _infer(server, "small_queue", 1.0, f"r{i}") for i in range(3)], stagger=0.15)
    errors = [result for result in results if isinstance(result, InferenceServerException)]
    assert len(errors) == 1
    refused = next(f"r{i}" for i, result in enumerate(results) if result is errors[0])
    assert (errors[0].status(), errors[0].message()) == ("503", f"[request id: {refused}] Exceeds maximum queue size")


@pytest.mark.parametrize(("instances", "bound"), [(2, 1.6)])
def test_two_instances_run_two_slow_requests_in_parallel(
    start: Callable[..., ServerProcess], instances: int, bound: float
) -> None:
    server = start({"parallel": recorder_config("", sleep=1.0, max_batch_size=1, instances=instances)})
    began = time.monotonic()
    results = _in_threads([lambda i=i: _infer(server, "parallel", float(i), f"r{i}") for i in range(2)])
    elapsed = time.monotonic() - began
    assert all(isinstance(result, np.ndarray) for result in results)
    assert elapsed < bound


def test_batches_are_logged_with_their_reason_at_verbose_level(
    start: Callable[..., ServerProcess], model_repository: ModelRepositoryBuilder
) -> None:
    server = start({"logged": recorder_config("dynamic_batching { }", sleep=0.0)}, "--log-verbose=1")
    _infer(server, "logged", 1.0, "only")
    deadline = time.monotonic() + 5
    while "executing a batch" not in server.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (
        "model 'logged': executing a batch of 1 rows (1 requests) on logged_0_0: queue delay expired" in server.logs()
    )
    assert Path(model_repository.root / "logged" / "log.txt").exists()
