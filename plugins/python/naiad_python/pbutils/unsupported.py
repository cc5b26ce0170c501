"""Triton python-backend APIs naiad does not implement yet: model control and custom metrics.

They exist so that models referencing them import fine; calling them raises a
``TritonModelException`` that says the feature is not supported by naiad yet.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from naiad_python.pbutils.errors import not_supported


def load_model(model_name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
    """Load a model from the repository (not supported yet)."""
    raise not_supported("pb_utils.load_model() (model control from a Python model)")


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload a model (not supported yet)."""
    raise not_supported("pb_utils.unload_model() (model control from a Python model)")


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether a model is ready (not supported yet)."""
    raise not_supported("pb_utils.is_model_ready() (model control from a Python model)")


class MetricKind(enum.IntEnum):
    """Custom metric kinds."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class MetricFamily:
    """A custom metric family (not supported yet: constructing one raises)."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        raise not_supported("pb_utils.MetricFamily (custom metrics)")
