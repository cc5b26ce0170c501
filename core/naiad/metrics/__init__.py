"""Prometheus metrics: Triton's families on ``--metrics-port``, from a registry each server owns.

* :mod:`naiad.metrics.models`: per-model families, rendered at scrape time from the statistics.
* :mod:`naiad.metrics.system`: CPU, RAM and GPU gauges, polled every ``--metrics-interval-ms``.
* :mod:`naiad.metrics.exposition`: the text format, written as Triton writes it.
* :mod:`naiad.metrics.serving`: the ``/metrics`` listener.
* :mod:`naiad.metrics.custom`: families backends and models register.

The package itself imports nothing, so a backend (or a python-model worker) that only needs
:mod:`naiad.metrics.custom` does not load the server's side.
"""
