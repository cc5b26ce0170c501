"""Decoupled models: responses from any thread, the final flag, and the return-None rule."""

from __future__ import annotations

import numpy as np

from naiad.backend import ErrorCode

from .conftest import LoadModel
from .models import ASYNC_DECOUPLED, DECOUPLED_REPEAT, DECOUPLED_RETURNS_LIST, DECOUPLED_REUSED_BUFFER


def test_repeat_sends_one_response_per_element_then_a_flag_only_final(load_model: LoadModel) -> None:
    model = load_model("repeat", DECOUPLED_REPEAT)
    pairs = [model.request({"IN": np.array([4, 5, 6][:n], np.int32)}) for n in (3, 0, 1)]
    model.execute([request for request, _ in pairs])
    expected = [[4, 5, 6], [], [4]]
    for (_, collected), values in zip(pairs, expected, strict=True):
        collected.wait()
        assert [int(r.outputs[0].data[0]) for r in collected.responses] == values
        assert all(r.outputs[0].datatype == "INT32" for r in collected.responses)
        final = collected.events[-1]
        assert final.final
        assert final.response is None
        assert sum(event.final for event in collected.events) == 1


def test_a_response_keeps_the_data_it_was_sent_with(load_model: LoadModel) -> None:
    model = load_model("reused_buffer", DECOUPLED_REUSED_BUFFER)
    collected = model.infer({"IN": np.array([7, 8, 9], np.int32)}).wait()
    assert [int(r.outputs[0].data[0]) for r in collected.responses] == [7, 8, 9]


def test_decoupled_execute_must_return_none(load_model: LoadModel) -> None:
    model = load_model("returns_list", DECOUPLED_RETURNS_LIST)
    collected = model.infer({"IN": np.array([1], np.int32)}).wait()
    assert len(collected.events) == 1
    response = collected.events[0].response
    assert response is not None
    assert response.error is not None
    assert response.error.code is ErrorCode.INTERNAL
    assert response.error.message == (
        "Failed to process the request(s) for model 'returns_list_0', message: Python model 'returns_list_0' "
        "is using the decoupled mode and the execute function must return None."
    )


def test_async_decoupled_execute_runs_in_the_background(load_model: LoadModel) -> None:
    model = load_model("async_decoupled", ASYNC_DECOUPLED)
    first = model.infer({"IN": np.array([3], np.int32)})
    second = model.infer({"IN": np.array([2], np.int32)})
    for collected, count in ((first, 3), (second, 2)):
        collected.wait()
        assert [int(r.outputs[0].data[0]) for r in collected.responses] == list(range(count))
        assert collected.events[-1].final


def test_async_decoupled_exception_fails_the_open_requests(load_model: LoadModel) -> None:
    model = load_model("async_decoupled", ASYNC_DECOUPLED)
    collected = model.infer({"IN": np.array([2], np.int32)}, parameters={"mode": "raise"}).wait()
    assert len(collected.responses) == 3
    last = collected.events[-1]
    assert last.final
    assert last.response is not None
    assert last.response.error is not None
    # Triton only logs this exception and leaves the request open; naiad answers it with Triton's text
    assert last.response.error.message == (
        "Failed to process the request(s) for model 'async_decoupled_0', message: RuntimeError: failed half way"
        f"\n\nAt:\n  {model.model_dir / '1' / 'model.py'}(18): execute\n"
    )
