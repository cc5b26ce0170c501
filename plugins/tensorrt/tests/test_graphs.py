"""The CUDA graphs an instance captures: Triton's default batch sizes, graph_spec and its checks."""

from __future__ import annotations

import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad_tensorrt.graphs import GraphSpec, capture_shapes, default_batch_sizes, graph_specs

from .engines import add_sub, config, variable_length


@pytest.mark.parametrize(
    ("max_batch_size", "preferred", "expected"),
    [
        (0, (), [0]),
        (1, (), [1]),
        (5, (), [1, 2, 3, 4, 5]),
        (16, (), [1, 2, 3, 4, 6, 8, 12, 16]),
        (64, (), [1, 2, 3, 4, 6, 8, 12, 16, 64]),
        (32, (4, 8), [1, 4, 8, 32]),
    ],
)
def test_default_batch_sizes(max_batch_size: int, preferred: tuple[int, ...], expected: list[int]) -> None:
    assert default_batch_sizes(max_batch_size, preferred) == expected


def test_graphs_only_when_asked() -> None:
    assert graph_specs(config("max_batch_size: 8")) == []
    specs = graph_specs(config("max_batch_size: 8 optimization { cuda { graphs: true } }"))
    assert [spec.batch_size for spec in specs] == [1, 2, 3, 4, 6, 8]
    preferred = (
        "max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4 ] } optimization { cuda { graphs: true } }"
    )
    assert [spec.batch_size for spec in graph_specs(config(preferred))] == [1, 4, 8]
    oldest = (
        "max_batch_size: 8 sequence_batching { oldest { preferred_batch_size: [ 2 ] } }"
        " optimization { cuda { graphs: true } }"
    )
    assert [spec.batch_size for spec in graph_specs(config(oldest))] == [1, 2, 8]


def test_graph_spec_entries_name_batch_size_and_shapes() -> None:
    text = """
    max_batch_size: 8
    optimization { cuda { graphs: true graph_spec [
      { batch_size: 2 input { key: "tokens" value: { dim: [ 64 ] } } },
      { batch_size: 4 input { key: "tokens" value: { dim: [ 32 ] } }
        graph_lower_bound { batch_size: 1 input { key: "tokens" value: { dim: [ 16 ] } } } }
    ] } }
    """
    specs = graph_specs(config(text))
    assert specs == [
        GraphSpec(2, {"tokens": (64,)}),
        GraphSpec(4, {"tokens": (32,)}, 1, {"tokens": (16,)}),
    ]
    assert capture_shapes(specs[0], variable_length(), 0, True, ["tokens"]) == {"tokens": (2, 64)}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("batch_size: 9", "graph spec expects 'batch_size' to be >= 1 and <= 8"),
        ("batch_size: 0", "graph spec expects 'batch_size' to be >= 1 and <= 8"),
        (
            "batch_size: 2 graph_lower_bound { batch_size: 4 }",
            "graph lower bound spec expects 'batch_size' to be <= graph spec 'batch_size'",
        ),
        (
            'batch_size: 2 input { key: "tokens" value: { dim: [ 8 ] } } graph_lower_bound { batch_size: 1 }',
            "graph lower bound spec expects shape for input 'tokens'",
        ),
        (
            'batch_size: 2 input { key: "tokens" value: { dim: [ 8 ] } }'
            ' graph_lower_bound { batch_size: 1 input { key: "tokens" value: { dim: [ 9 ] } } }',
            "graph lower bound spec expects input 'tokens' to have dimension <= 8",
        ),
        (
            'batch_size: 2 input { key: "tokens" value: { dim: [ 8 ] } }'
            ' graph_lower_bound { batch_size: 1 input { key: "tokens" value: { dim: [ 4, 4 ] } } }',
            "graph lower bound spec expects to have '1' dimensions, got 2",
        ),
        (
            'batch_size: 2 input { key: "tokens" value: { dim: [ -3 ] } }',
            "graph spec expects input 'tokens' to have dimension >= 0",
        ),
    ],
)
def test_bad_graph_specs_are_refused(spec: str, expected: str) -> None:
    text = f"max_batch_size: 8 optimization {{ cuda {{ graphs: true graph_spec [ {{ {spec} }} ] }} }}"
    with pytest.raises(NaiadError) as caught:
        graph_specs(config(text))
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message == f"model 'm': optimization.cuda.graph_spec: {expected}"


def test_a_model_without_batching_takes_only_batch_size_0() -> None:
    text = "optimization { cuda { graphs: true graph_spec [ { batch_size: 1 } ] } }"
    with pytest.raises(NaiadError, match="graph spec expects 'batch_size' to be 0 if 'max_batch_size' is 0"):
        graph_specs(config(text))
    assert [spec.batch_size for spec in graph_specs(config("optimization { cuda { graphs: true } }"))] == [0]


def test_capture_shapes_use_the_profiles_optimal_shape_and_skip_what_does_not_fit() -> None:
    engine = add_sub()  # profile 0: batch 1 to 16 (opt 8), profile 1: 16 to 64
    inputs = ["INPUT0", "INPUT1"]
    assert capture_shapes(GraphSpec(4), engine, 0, True, inputs) == {"INPUT0": (4, 4), "INPUT1": (4, 4)}
    assert capture_shapes(GraphSpec(4), engine, 1, True, inputs) is None
    assert capture_shapes(GraphSpec(2), variable_length(), 0, True, ["tokens"]) == {"tokens": (2, 64)}
