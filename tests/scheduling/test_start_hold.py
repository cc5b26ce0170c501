"""Triton's scheduler test hooks (TRITONSERVER_DELAY_SCHEDULER, TRITONSERVER_BACKLOG_DELAY_SCHEDULER):
the first batch waits until enough requests are queued, as Triton's QA expects of its batchers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from naiad.scheduling.start_hold import BACKLOG_DELAY_VARIABLE, DELAY_VARIABLE, StartHold
from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server


@pytest.mark.parametrize(("value", "count"), [("12", 12), (" 3x", 3), ("abc", 0), ("", 0), ("-4", 0)])
def test_the_count_is_read_as_atoi_reads_it(monkeypatch: pytest.MonkeyPatch, value: str, count: int) -> None:
    monkeypatch.setenv(DELAY_VARIABLE, value)
    assert StartHold("m").queued == count


def test_the_hold_ends_once_enough_requests_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DELAY_VARIABLE, "3")
    monkeypatch.setenv(BACKLOG_DELAY_VARIABLE, "1")
    hold = StartHold("m", with_backlog=True)
    assert hold.holding(2)
    assert hold.holding(3, backlog=0)  # the backlog must fill too
    assert not hold.holding(3, backlog=1)
    assert not hold.holding(0)  # for good


def test_the_backlog_hold_needs_the_queue_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKLOG_DELAY_VARIABLE, "2")  # alone it does nothing, as in Triton
    assert not StartHold("m", with_backlog=True).holding(0)


CONFIG = """
backend: "identity"
max_batch_size: 4
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
{batcher}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("start_hold") / "models")
    repository.add_model("dynamic", CONFIG.format(batcher="dynamic_batching { }"), {"1/.keep": ""})
    repository.add_model("direct", CONFIG.format(batcher="sequence_batching { direct { } }"), {"1/.keep": ""})
    process = start_server([repository.root], env={DELAY_VARIABLE: "3"})
    yield process
    process.stop()


def _infer(server: ServerProcess, model: str, value: float, delay_s: float, sequence_id: int = 0) -> float:
    """Send one request after ``delay_s``; returns when it was answered (monotonic seconds)."""
    time.sleep(delay_s)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensor = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.float32))
    sequence = {"sequence_id": sequence_id, "sequence_start": True, "sequence_end": True} if sequence_id else {}
    result = client.infer(model, [tensor], **sequence)
    client.close()
    assert result.as_numpy("OUTPUT0").tolist() == [[value]]
    return time.monotonic()


def _batches(server: ServerProcess, model: str) -> dict[int, int]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    client.close()
    return {int(batch["batch_size"]): int(batch["compute_infer"]["count"]) for batch in stats["batch_stats"]}


@pytest.mark.parametrize("model", ["dynamic", "direct"])
def test_the_first_batch_waits_for_three_queued_requests(server: ServerProcess, model: str) -> None:
    base = 10 if model == "direct" else 0
    with ThreadPoolExecutor(3) as pool:
        answered = list(
            pool.map(
                lambda index: _infer(server, model, float(index), 0.3 * index, base + index + 1 if base else 0),
                range(3),
            )
        )
    assert max(answered) - min(answered) < 0.25  # the first waited for the third
    assert _batches(server, model) == {3: 1}
    started = time.monotonic()
    _infer(server, model, 7.0, 0, base + 9 if base else 0)  # the hold is over: a lone request runs at once
    assert time.monotonic() - started < 1.0
    assert _batches(server, model) == {3: 1, 1: 1}
