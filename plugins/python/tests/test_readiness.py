"""``is_ready``: sync on the instance's readiness thread, async on its event loop, never blocking naiad's loop."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

import numpy as np
import pytest

from naiad_python import instance as python_instance

from .conftest import LoadModel, await_ready, ready
from .models import ADD_SUB, readiness_model

ON_READY_THREAD = """
def is_ready(self):
    return threading.current_thread().name.startswith("naiad-python-ready-")
"""
ON_INSTANCE_LOOP = """
async def is_ready(self):
    await asyncio.sleep(0.01)
    return threading.current_thread().name.startswith("naiad-python-loop-")
"""

# the coroutine a sync is_ready returns runs on the instance's loop too
SYNC_RETURNING_A_COROUTINE = """
def is_ready(self):
    async def check():
        return threading.current_thread().name.startswith("naiad-python-loop-")

    return check()
"""


def test_is_ready_is_async_so_naiad_awaits_it(load_model: LoadModel) -> None:
    model = load_model("ready", readiness_model(ON_READY_THREAD))
    assert inspect.iscoroutinefunction(model.instances[0].is_ready)


def test_a_model_without_is_ready_is_ready(load_model: LoadModel) -> None:
    assert ready(load_model("add_sub", ADD_SUB).instances[0])


@pytest.mark.parametrize(
    "is_ready",
    [
        ON_READY_THREAD,
        ON_INSTANCE_LOOP,
        SYNC_RETURNING_A_COROUTINE,
    ],
    ids=["sync", "async", "sync-returning-coroutine"],
)
def test_is_ready_runs_on_the_instances_threads(load_model: LoadModel, is_ready: str) -> None:
    model = load_model("ready", readiness_model(is_ready))
    assert ready(model.instances[0])
    np.testing.assert_array_equal(model.infer({"IN": np.array([7], np.int32)}).outputs()["OUT"], [7])


@pytest.mark.parametrize(
    "is_ready",
    [
        "def is_ready(self):\n    time.sleep(0.3)\n    return True",
        "async def is_ready(self):\n    time.sleep(0.3)\n    return True",
    ],
    ids=["sync", "async"],
)
def test_a_slow_is_ready_does_not_block_the_awaiting_loop(load_model: LoadModel, is_ready: str) -> None:
    instance = load_model("ready", readiness_model(is_ready)).instances[0]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    async def ask() -> bool:
        ticker = asyncio.create_task(tick())
        try:
            return await await_ready(instance)
        finally:
            ticker.cancel()

    assert asyncio.run(ask())
    assert ticks >= 10


@pytest.mark.parametrize(
    ("is_ready", "logged"),
    [
        ("def is_ready(self):\n    raise RuntimeError('no GPU')", "raised RuntimeError: no GPU"),
        ("async def is_ready(self):\n    raise RuntimeError('no GPU')", "raised RuntimeError: no GPU"),
        ("def is_ready(self):\n    time.sleep(1)\n    return True", "took more than 0.2 s"),
        ("async def is_ready(self):\n    await asyncio.sleep(1)\n    return True", "took more than 0.2 s"),
    ],
    ids=["sync-raises", "async-raises", "sync-too-slow", "async-too-slow"],
)
def test_is_ready_failures_count_as_not_ready(
    load_model: LoadModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, is_ready: str, logged: str
) -> None:
    monkeypatch.setattr(python_instance, "IS_READY_TIMEOUT_S", 0.2)
    instance = load_model("ready", readiness_model(is_ready)).instances[0]
    with caplog.at_level(logging.WARNING, logger="naiad.python"):
        started = time.monotonic()
        assert not ready(instance)
    assert time.monotonic() - started < 0.9
    assert f"is_ready() of model 'ready' {logged}" in caplog.text
