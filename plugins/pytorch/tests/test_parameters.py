"""Parsing Triton's PyTorch backend parameters and the ``<name>__<index>`` convention (no torch needed)."""

from __future__ import annotations

import pytest

from naiad.backend import ErrorCode, ModelParameter, NaiadError
from naiad_pytorch.binding import named_index
from naiad_pytorch.parameters import TorchParameters, parse_parameters, setting_lines


def params(**values: str) -> dict[str, ModelParameter]:
    return {key: ModelParameter(string_value=value) for key, value in values.items()}


def test_defaults_match_triton() -> None:
    parsed = parse_parameters("m", {})
    assert parsed == TorchParameters()
    assert parsed.inference_mode is True
    assert parsed.optimized_execution is True
    assert parsed.cudnn is True
    assert parsed.cache_cleaning is False
    assert parsed.weight_sharing is False
    assert (parsed.tensor_fuser, parsed.jit_profiling, parsed.jit_executor) == (None, None, None)
    assert (parsed.intra_op_threads, parsed.inter_op_threads) == (None, None)


def test_every_parameter() -> None:
    parsed = parse_parameters(
        "m",
        params(
            DISABLE_OPTIMIZED_EXECUTION="True",
            INFERENCE_MODE="off",
            DISABLE_CUDNN="1",
            ENABLE_CACHE_CLEANING="on",
            ENABLE_WEIGHT_SHARING="TRUE",
            ENABLE_TENSOR_FUSER="false",
            ENABLE_JIT_PROFILING="0",
            ENABLE_JIT_EXECUTOR="true",
            INTRA_OP_THREAD_COUNT="4",
            INTER_OP_THREAD_COUNT=" 2 ",
            SOMETHING_ELSE="ignored",
        ),
    )
    assert parsed == TorchParameters(
        optimized_execution=False,
        inference_mode=False,
        cudnn=False,
        cache_cleaning=True,
        weight_sharing=True,
        tensor_fuser=False,
        jit_profiling=False,
        jit_executor=True,
        intra_op_threads=4,
        inter_op_threads=2,
    )


def test_non_positive_thread_counts_leave_torch_alone() -> None:
    parsed = parse_parameters("m", params(INTRA_OP_THREAD_COUNT="0", INTER_OP_THREAD_COUNT="-1"))
    assert (parsed.intra_op_threads, parsed.inter_op_threads) == (None, None)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ENABLE_CACHE_CLEANING": "yes"}, "parameter 'ENABLE_CACHE_CLEANING': failed to convert 'yes' to boolean"),
        ({"INTRA_OP_THREAD_COUNT": "four"}, "parameter 'INTRA_OP_THREAD_COUNT': failed to convert 'four' to integral"),
    ],
)
def test_bad_values_name_the_parameter(values: dict[str, str], message: str) -> None:
    with pytest.raises(NaiadError) as caught:
        parse_parameters("m", params(**values))
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message.startswith(f"model 'm': {message}")


@pytest.mark.parametrize(
    ("name", "index"),
    [("INPUT__0", 0), ("OUTPUT__12", 12), ("x__3", 3), ("INPUT0", None), ("INPUT__", 0), ("A__B__1", None)],
)
def test_named_index(name: str, index: int | None) -> None:
    assert named_index(name) == index


def test_setting_lines_are_tritons() -> None:
    """The lines Triton's QA counts (one per loaded version): four always, the optional ones when given."""
    given = params(INFERENCE_MODE="false", ENABLE_WEIGHT_SHARING="true")
    assert setting_lines("m", parse_parameters("m", given), given.keys()) == [
        "Optimized execution is enabled for model instance 'm'",
        "Cache Cleaning is disabled for model instance 'm'",
        "Inference Mode is disabled for model instance 'm'",
        "cuDNN is enabled for model instance 'm'",
        "Weight sharing is enabled for model instance 'm'",
    ]
