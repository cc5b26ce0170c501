"""The rate limiter: instances that share a resource never execute at the same time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.scheduling.rate_limiter import GLOBAL_DEVICE, RateLimiter, ResourceNeeds, parse_resource
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
    with pytest.raises(ValueError, match=r"needs 2 of rate-limiter resource 'R' .* --rate-limit-resource=R:2"):
        limiter.register(ResourceNeeds({("R", GLOBAL_DEVICE): 2}), "greedy")


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
    with pytest.raises(ValueError, match=r"needs 3 of rate-limiter resource 'R' \(device 1\)"):
        limiter.register(ResourceNeeds({("R", 1): 3}), "greedy")


def test_parse_resource() -> None:
    assert parse_resource("R:4") == (("R", GLOBAL_DEVICE), 4)
    assert parse_resource("mem:2:1") == (("mem", 1), 2)
    with pytest.raises(ValueError, match="expected <name>:<count>"):
        parse_resource("R")


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
