"""Metrics settings: ``--allow-*-metrics``, ``--metrics-interval-ms`` and ``--metrics-config`` (Triton's names)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from naiad.statistics import StatisticsOptions

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

METRICS_CONFIG_KEYS = (
    "counter_latencies",
    "histogram_latencies",
    "summary_latencies",
    "summary_quantiles",
    "response_latencies",
)


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    """How the metrics endpoint behaves and which families it exposes."""

    allow_metrics: bool = True
    allow_cpu_metrics: bool = True
    allow_gpu_metrics: bool = True
    address: str = ""  # "" = the HTTP address
    interval_ms: int = 2000
    counter_latencies: bool = True
    statistics: StatisticsOptions = field(default_factory=StatisticsOptions)


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"--metrics-config {key} expects true or false, got '{value}'")


def parse_quantiles(text: str) -> tuple[tuple[float, float], ...]:
    """``0.5:0.05,0.9:0.01`` -> ((0.5, 0.05), (0.9, 0.01)); ValueError with the reason otherwise."""
    quantiles: list[tuple[float, float]] = []
    for item in text.split(","):
        quantile, colon, error = item.strip().partition(":")
        try:
            pair = (float(quantile), float(error))
        except ValueError:
            pair = (-1.0, -1.0)
        if not colon or not (0.0 <= pair[0] <= 1.0 and 0.0 <= pair[1] <= 1.0):
            raise ValueError(
                f"--metrics-config summary_quantiles expects <quantile>:<error>,... with both in [0, 1] "
                f"(e.g. 0.5:0.05,0.99:0.001), got '{text}'"
            )
        quantiles.append(pair)
    return tuple(quantiles)


def apply_metrics_config(options: MetricsOptions, settings: Sequence[str]) -> MetricsOptions:
    """``options`` with each ``--metrics-config <key>=<value>`` applied; ValueError names a bad one."""
    statistics = options.statistics
    counter_latencies = options.counter_latencies
    for setting in settings:
        key, equals, value = setting.partition("=")
        key = key.strip()
        if not equals:
            raise ValueError(f"--metrics-config expects <key>=<value>, got '{setting}'")
        if key == "counter_latencies":
            counter_latencies = _bool(key, value)
        elif key == "histogram_latencies":
            statistics = replace(statistics, histogram_latencies=_bool(key, value))
        elif key == "summary_latencies":
            statistics = replace(statistics, summary_latencies=_bool(key, value))
        elif key == "summary_quantiles":
            statistics = replace(statistics, summary_quantiles=parse_quantiles(value))
        elif key == "response_latencies":
            statistics = replace(statistics, response_latencies=_bool(key, value))
        else:
            raise ValueError(f"unknown --metrics-config key '{key}'; known keys: {', '.join(METRICS_CONFIG_KEYS)}")
    return replace(options, counter_latencies=counter_latencies, statistics=statistics)
