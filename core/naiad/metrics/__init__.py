"""Prometheus metrics: Triton's families on ``--metrics-port``, from a registry each server owns.

* :mod:`naiad.metrics.models`: per-model families, rendered at scrape time from the statistics.
* :mod:`naiad.metrics.system`: CPU, RAM and GPU gauges, polled every ``--metrics-interval-ms``.
* :mod:`naiad.metrics.exposition`: the text format, written as Triton writes it.
* :mod:`naiad.metrics.serving`: the ``/metrics`` listener.
"""

from naiad.metrics.config import MetricsOptions, apply_metrics_config
from naiad.metrics.exposition import render
from naiad.metrics.models import ModelCollector
from naiad.metrics.system import SystemMetrics

__all__ = ["MetricsOptions", "ModelCollector", "SystemMetrics", "apply_metrics_config", "render"]
