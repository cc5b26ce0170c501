"""OpenVINO partial shapes against Triton dims: conversion, matching and formatting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def to_dims(shape: Any) -> list[int]:
    """Dims of an ``ov.PartialShape`` (static rank), ``-1`` for every dynamic dimension."""
    return [dim.get_length() if dim.is_static else -1 for dim in shape]


def fmt(dims: Sequence[int]) -> str:
    """``[-1,3,224]`` (Triton's shape formatting)."""
    return "[" + ",".join(str(dim) for dim in dims) + "]"


def fmt_partial(shape: Any) -> str:
    """A partial shape as Triton prints it: ``[-1,4]``, or ``[...]`` for a dynamic rank."""
    return "[...]" if shape.rank.is_dynamic else fmt(to_dims(shape))


def dim_matches(model_dim: Any, config_dim: int) -> bool:
    """Whether a config dimension fits an OpenVINO dimension.

    A static model dimension must equal the config value; a dynamic one accepts ``-1`` and
    any value within its bounds (Triton's rule, with inclusive bounds).
    """
    if model_dim.is_static:
        return bool(model_dim.get_length() == config_dim)
    if config_dim == -1:
        return True
    low: int = model_dim.get_min_length()
    high: int = model_dim.get_max_length()
    return config_dim >= low and (high < 0 or config_dim <= high)


def dims_match(model_shape: Any, dims: Sequence[int], *, exact: bool, skip_first: bool) -> bool:
    """Compare full config dims with a model shape.

    ``exact=False`` (inputs) skips config ``-1`` entries; ``exact=True`` (outputs) compares
    every entry. ``skip_first`` leaves the batch dimension out of the comparison.
    """
    if model_shape.rank.is_dynamic:
        return True
    if len(model_shape) != len(dims):
        return False
    for index, (model_dim, config_dim) in enumerate(zip(model_shape, dims, strict=True)):
        if index == 0 and skip_first:
            continue
        if not exact and config_dim == -1:
            continue
        if not dim_matches(model_dim, config_dim):
            return False
    return True
