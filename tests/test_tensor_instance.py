"""TensorInstance merges a batch into one engine call and splits the results per request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import InferenceRequest, ResponseEvent, ResponseSender, Tensor
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInput, ModelOutput
from naiad.tensor_instance import TensorInstance


class Doubler(TensorInstance):
    """Doubles X into Y and sums rows into S; records the batch sizes it was called with."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.calls: list[int] = []

    def run(self, inputs: dict[str, npt.NDArray[Any]]) -> Mapping[str, npt.NDArray[Any]]:
        x = inputs["X"]
        self.calls.append(x.shape[0])
        if not np.isfinite(x).all():
            raise ValueError("X must be finite")
        return {"Y": x * 2, "S": x.sum(axis=1, keepdims=True)}


def _config(max_batch_size: int) -> ModelConfig:
    return ModelConfig(
        name="doubler",
        max_batch_size=max_batch_size,
        input=[ModelInput(name="X", data_type=11, dims=[-1])],
        output=[
            ModelOutput(name="Y", data_type=11, dims=[-1]),
            ModelOutput(name="S", data_type=12, dims=[1]),
        ],
    )


def _request(data: list[list[float]], outputs: list[str], events: list[ResponseEvent]) -> InferenceRequest:
    array = np.array(data, dtype=np.float32)
    return InferenceRequest(
        model_name="doubler",
        model_version=1,
        inputs={"X": Tensor("X", "FP32", array)},
        requested_outputs=outputs,
        sender=ResponseSender(events.append),
        batch_size=array.shape[0],
    )


def test_requests_of_one_shape_share_one_call_and_get_their_own_rows() -> None:
    instance = Doubler(_config(8))
    first: list[ResponseEvent] = []
    second: list[ResponseEvent] = []
    instance.execute([_request([[1, 2]], ["Y", "S"], first), _request([[3, 4], [5, 6]], ["Y"], second)])
    assert instance.calls == [3]
    assert first[0].final
    assert first[0].response is not None
    assert second[0].response is not None
    y1, s1 = first[0].response.outputs
    np.testing.assert_array_equal(y1.data, [[2, 4]])
    assert (s1.datatype, s1.data.dtype) == ("FP64", np.float64)
    np.testing.assert_array_equal(s1.data, [[3]])
    assert [t.name for t in second[0].response.outputs] == ["Y"]
    np.testing.assert_array_equal(second[0].response.outputs[0].data, [[6, 8], [10, 12]])


def test_different_shapes_run_separately() -> None:
    instance = Doubler(_config(8))
    events: list[ResponseEvent] = []
    instance.execute([_request([[1, 2]], ["Y"], events), _request([[1, 2, 3]], ["Y"], events)])
    assert instance.calls == [1, 1]
    assert len(events) == 2


def test_engine_error_fails_the_group_with_the_model_name() -> None:
    instance = Doubler(_config(8))
    events: list[ResponseEvent] = []
    instance.execute([_request([[np.inf, 1]], ["Y"], events), _request([[1, 1]], ["Y"], events)])
    errors = [event.response.error for event in events if event.response is not None]
    assert len(errors) == 2
    assert all(
        error is not None and error.message == "model 'doubler' failed: ValueError: X must be finite"
        for error in errors
    )


def test_non_batching_models_run_each_request_alone() -> None:
    instance = Doubler(_config(0))
    events: list[ResponseEvent] = []
    instance.execute([_request([[1, 2]], ["Y"], events), _request([[3, 4]], ["Y"], events)])
    assert instance.calls == [1, 1]
