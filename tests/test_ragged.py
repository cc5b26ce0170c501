"""The batch_input and batch_output tensors of ragged batching, by Triton's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.protocol.model_config_pb2 import BatchInput
from naiad.ragged import batch_input_array, scattered

KIND = BatchInput.Kind
SHAPES = [(1, 2), (2, 3), (1, 4)]  # three requests: 1 item of 2 elements, 2 items of 3, 1 item of 4


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (KIND.BATCH_ELEMENT_COUNT, [2, 6, 4]),
        (KIND.BATCH_ACCUMULATED_ELEMENT_COUNT, [2, 8, 12]),
        (KIND.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO, [0, 2, 8, 12]),
        (KIND.BATCH_ITEM_SHAPE, [[2], [3], [3], [4]]),
        (KIND.BATCH_ITEM_SHAPE_FLATTEN, [2, 3, 3, 4]),
    ],
)
def test_batch_input_values(kind: int, expected: list[int]) -> None:
    np.testing.assert_array_equal(batch_input_array(kind, SHAPES), expected)


def test_the_max_element_count_is_carried_by_the_shape() -> None:
    assert batch_input_array(KIND.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, SHAPES).shape == (6,)


def test_a_scattered_output_takes_each_requests_source_shape_in_order() -> None:
    flat = np.arange(12)
    parts = scattered(flat, (-1, -1), SHAPES)
    assert [part.shape for part in parts] == SHAPES
    np.testing.assert_array_equal(np.concatenate([part.reshape(-1) for part in parts]), flat)
    # a fixed trailing dimension multiplies what each request takes
    pairs = scattered(np.arange(24), (-1, -1, 2), SHAPES)
    assert [part.shape for part in pairs] == [(1, 2, 2), (2, 3, 2), (1, 4, 2)]
