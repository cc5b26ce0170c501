"""Requests made on behalf of another (``parent=``): lineage, the cycle refusal and inherited cancellation.

Identity models served by the real server in this process; the requests go in through
:class:`naiad.backend.ServerHandle` as a backend's calls to other models do.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from naiad.backend import BlockingSink, ErrorCode, InferenceRequest, NaiadError, Tensor
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

from .backends import IDENTITY_CONFIG

TIMEOUT_S = 10


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("lineage") / "models")
    for name in ("first", "third"):
        repository.add_model(name, IDENTITY_CONFIG.format(extra=""), {"1/.keep": ""})
    slow = 'parameters { key: "execute_delay_ms" value: { string_value: "300" } }'
    repository.add_model("slow", IDENTITY_CONFIG.format(extra=slow), {"1/.keep": ""})
    with serve_in_thread([repository.root]) as server:
        yield server


def _row(value: float) -> list[Tensor]:
    return [Tensor("INPUT0", "FP32", np.array([[value]], dtype=np.float32))]


def _submit(served: ThreadedServer, model: str, parent: InferenceRequest | None = None) -> InferenceRequest:
    return served.handle.submit(model, _row(1.0), BlockingSink(), parent=parent)


def test_a_child_extends_its_parents_lineage(served: ThreadedServer) -> None:
    root = _submit(served, "slow")
    child = _submit(served, "first", root)
    grandchild = _submit(served, "third", child)
    assert root.lineage == ()
    assert child.lineage == ("slow",)
    assert grandchild.lineage == ("slow", "first")


def test_a_request_back_into_its_lineage_is_refused(served: ThreadedServer) -> None:
    root = _submit(served, "slow")
    with pytest.raises(NaiadError) as self_call:
        _submit(served, "slow", root)
    assert self_call.value.code is ErrorCode.INVALID_ARG
    assert self_call.value.message.startswith("request cycle: model 'slow' -> 'slow';")
    child = _submit(served, "first", root)
    with pytest.raises(NaiadError) as cycle:
        _submit(served, "slow", child)
    assert cycle.value.code is ErrorCode.INVALID_ARG
    assert cycle.value.message.startswith("request cycle: model 'slow' -> 'first' -> 'slow';")


def test_a_child_is_cancelled_with_its_parent_but_not_the_other_way(served: ThreadedServer) -> None:
    parent = _submit(served, "first")
    busy = _submit(served, "slow")  # occupies slow's one instance, so the children stay queued
    sinks = [BlockingSink(), BlockingSink()]
    children = [served.handle.submit("slow", _row(2.0), sink, parent=parent) for sink in sinks]
    children[0].cancel()
    assert not parent.is_cancelled()
    parent.cancel()
    assert all(child.is_cancelled() for child in children)
    for sink in sinks:
        event = sink.next_event(TIMEOUT_S)
        assert event.response is not None
        assert event.response.error is not None
        assert event.response.error.code is ErrorCode.CANCELLED
    assert not busy.is_cancelled()


def test_a_finished_child_stops_following_its_parent(served: ThreadedServer) -> None:
    parent = _submit(served, "slow")
    sink = BlockingSink()
    child = served.handle.submit("first", _row(3.0), sink, parent=parent)
    assert sink.next_event(TIMEOUT_S).final
    parent.cancel()
    assert not child.is_cancelled()
