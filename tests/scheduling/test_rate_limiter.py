"""The rate limiter: instances that share a resource never execute at the same time."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.errors import ErrorCode, NaiadError
from naiad.scheduling.rate_limiter import GLOBAL_DEVICE, RateLimiter, ResourceNeeds, _Waiter, parse_resource
from naiad.testing import ModelRepositoryBuilder, ServerProcess


def test_resources_default_to_the_largest_need_and_exclude_each_other() -> None:
    limiter = RateLimiter({})
    first = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 2}), "a")
    second = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}), "b")
    limiter.acquire(first)
    took_second = threading.Event()
    worker = threading.Thread(target=lambda: (limiter.acquire(second), took_second.set()))
    worker.start()
    assert not took_second.wait(0.2)  # "a" holds both units of R
    limiter.release(first)
    assert took_second.wait(5)
    limiter.release(second)
    worker.join()


def test_explicit_totals_refuse_instances_that_could_never_run() -> None:
    limiter = RateLimiter({("R", GLOBAL_DEVICE): 1})
    with pytest.raises(NaiadError) as caught:
        limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 2}), "greedy")
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message.startswith(  # Triton's words, then which model and what to do
        'Resource count for "R" is limited to 1 which will prevent scheduling of one or more model instances, '
        "the minimum required count is 2 (model 'greedy'; raise it with --rate-limit-resource=R:2)"
    )


def test_once_any_total_is_given_a_resource_not_named_has_none() -> None:
    limiter = RateLimiter({("R", GLOBAL_DEVICE): 4})
    with pytest.raises(NaiadError, match=r'Resource count for "S" is limited to 0 .* minimum required count is 1'):
        limiter.register(ResourceNeeds({("S", GLOBAL_DEVICE): 1}), "other")


def test_a_global_resource_takes_the_largest_total_given_for_any_device() -> None:
    limiter = RateLimiter({("R", 0): 1, ("R", 1): 3})
    limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 3}), "wide")
    with pytest.raises(NaiadError, match=r"limited to 3 .* minimum required count is 4"):
        limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 4}), "wider")


def test_a_resource_is_global_or_per_device_never_both() -> None:
    limiter = RateLimiter({})
    limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}), "a")
    with pytest.raises(NaiadError) as caught:
        limiter.register(ResourceNeeds({("R", 0): 1}), "b")
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message == (
        'Resource "R" is present as both global and device-specific resource in the model configuration.'
    )


def test_a_total_without_a_device_counts_for_each_device() -> None:
    """As Triton: ``--rate-limit-resource=R:2`` lets two instances on device 0 that need one R each run
    together (it is not a global resource's count only)."""
    limiter = RateLimiter({("R", GLOBAL_DEVICE): 2})
    first = limiter.register(ResourceNeeds({("R", 0): 1}), "a")
    second = limiter.register(ResourceNeeds({("R", 0): 1}), "a")
    limiter.acquire(first)
    took_second = threading.Event()
    worker = threading.Thread(target=lambda: (limiter.acquire(second), took_second.set()))
    worker.start()
    assert took_second.wait(5)  # both units of R on device 0
    limiter.release(first)
    limiter.release(second)
    worker.join()
    with pytest.raises(NaiadError, match=r'Resource count for "R" is limited to 2 .* minimum required count is 3'):
        limiter.register(ResourceNeeds({("R", 1): 3}), "greedy")


def test_parse_resource() -> None:
    assert parse_resource("R:4") == (("R", GLOBAL_DEVICE), 4)
    assert parse_resource("mem:2:1") == (("mem", 1), 2)
    with pytest.raises(ValueError, match="expected <name>:<count>"):
        parse_resource("R")
    with pytest.raises(ValueError, match="must be whole numbers, got 'R:abc'"):
        parse_resource("R:abc")


SLOW = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.8)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""

LIMITED = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R" global: true count: 1 } ] } } ]
"""


def _two_slow_requests(server: ServerProcess) -> float:
    def call(model: str) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, dtype=np.float32))
        client.infer(model, [tensor])

    began = time.monotonic()
    threads = [threading.Thread(target=call, args=(model,)) for model in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return time.monotonic() - began


@pytest.mark.parametrize(("mode", "serialised"), [("execution_count", True), ("off", False)])
def test_models_sharing_a_resource_take_turns(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], mode: str, serialised: bool
) -> None:
    for name in ("first", "second"):
        model_repository.add_python_model(name, SLOW, LIMITED)
    server = naiad_server(model_repository.root, args=(f"--rate-limit={mode}",))
    elapsed = _two_slow_requests(server)
    assert (elapsed >= 1.6) is serialised


def test_a_model_needing_more_than_the_command_line_gives_fails_to_load_with_tritons_reason(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model("first", SLOW, LIMITED)
    model_repository.add_python_model("greedy", SLOW, LIMITED.replace("count: 1", "count: 4"))
    server = naiad_server(model_repository.root, args=("--rate-limit=execution_count", "--rate-limit-resource=R:1"))
    client = httpclient.InferenceServerClient(server.http_url)
    index = {entry["name"]: entry for entry in client.get_model_repository_index()}
    assert index["first"]["state"] == "READY"
    assert index["greedy"]["state"] == "UNAVAILABLE"
    assert index["greedy"]["reason"].startswith(
        'Invalid argument: Resource count for "R" is limited to 1 which will prevent scheduling of one or more '
        "model instances, the minimum required count is 4"
    )


def _take_turns(limiter: RateLimiter, waiter: _Waiter, name: str, turns: int, order: list[str]) -> None:
    """A worker with work always queued: each execution keeps its resources for the next ask."""
    for _ in range(turns):
        limiter.acquire(waiter)
        order.append(name)
        limiter.release(waiter, keep=True)
    limiter.end_turn(waiter)


def test_an_instance_with_more_work_competes_for_the_next_turn_by_priority() -> None:
    """As Triton's rate limiter (fewest executions times priority first, two counted before the first):
    with both instances busy, priority 1 gets two turns for each one of priority 2; a finished instance
    does not simply hand its turn to whoever waits."""
    limiter = RateLimiter({("R", GLOBAL_DEVICE): 1})
    gate = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}), "gate")
    low = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}, priority=1), "low")
    high = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}, priority=2), "high")
    limiter.acquire(gate)
    order: list[str] = []
    workers = [
        threading.Thread(target=_take_turns, args=(limiter, waiter, name, 6, order))
        for waiter, name in ((low, "low"), (high, "high"))
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 5
    while not (low.waiting and high.waiting) and time.monotonic() < deadline:
        time.sleep(0.01)
    limiter.release(gate)
    for worker in workers:
        worker.join(10)
    assert order[:9] == ["low", "low", "high", "low", "low", "high", "low", "low", "high"]
    assert sorted(order) == ["high"] * 6 + ["low"] * 6  # every turn was taken, and the resource given back
    assert limiter._free[("R", GLOBAL_DEVICE)] == 1


def test_a_kept_turn_is_given_back_when_the_instance_finds_no_work() -> None:
    limiter = RateLimiter({("R", GLOBAL_DEVICE): 1})
    first = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}), "a")
    second = limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 1}), "b")
    limiter.acquire(first)
    limiter.release(first, keep=True)
    took_second = threading.Event()
    worker = threading.Thread(target=lambda: (limiter.acquire(second), took_second.set()))
    worker.start()
    assert not took_second.wait(0.2)  # "a" still holds R while it looks for its next batch
    limiter.end_turn(first)
    assert took_second.wait(5)
    limiter.release(second)
    worker.join()
    limiter.unregister(first)


ORDERED = """
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils

WORK = Path(WORK_DIR)


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        if requests[0].inputs()[0].as_numpy()[0] == 1:  # hold the resource until the rest is queued
            (WORK / "started").touch()
            while not (WORK / "go").exists():
                time.sleep(0.02)
        with open(WORK / "order", "a") as log:
            log.write(self.name + "\\n")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""


def _pending(server: ServerProcess) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nv_inference_pending_request_count{"):
            model = line.split('model="')[1].split('"')[0]
            counts[model] = float(line.rsplit(" ", 1)[1])
    return counts


@pytest.mark.parametrize(
    ("priorities", "turns"),
    [((1, 10), "LLLLLHHHH"), ((1, 1), "LHLHLHLHL"), ((1, 3), "LLLLHLHHH"), ((4, 3), "LHHLHHLLL")],
)
def test_queued_work_takes_turns_on_a_shared_resource_as_on_triton(
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
    priorities: tuple[int, int],
    turns: str,
) -> None:
    """Both models have five and four requests queued when the resource frees: the turns go by executions
    times priority, in the order Triton 2.51 ran the same requests (L: the model named first)."""
    work = model_repository.root.parent / "work"
    work.mkdir()
    for name, priority in zip(("low", "high"), priorities, strict=True):
        config = LIMITED.replace("count: 1 } ]", f"count: 1 }} ] priority: {priority}")
        model_repository.add_python_model(name, ORDERED.replace("WORK_DIR", repr(str(work))), config)
    server = naiad_server(model_repository.root, args=("--rate-limit=execution_count",))

    def call(model: str, value: float) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.full(1, value, dtype=np.float32))
        client.infer(model, [tensor])

    first = threading.Thread(target=call, args=("low", 1.0))
    first.start()
    deadline = time.monotonic() + 10
    while not (work / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    others = [threading.Thread(target=call, args=(model, 2.0)) for model in ("low", "high") for _ in range(4)]
    for thread in others:
        thread.start()
    while _pending(server) != {"low": 4, "high": 4} and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _pending(server) == {"low": 4, "high": 4}
    (work / "go").touch()
    for thread in [first, *others]:
        thread.join(30)
    order = (work / "order").read_text().split()
    assert "".join(name[0].upper() for name in order) == turns
