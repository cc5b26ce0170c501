"""The response cache's server-wide gauges (Triton's ``nv_cache_*`` without ``_per_model``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from naiad.response_cache import ResponseCache


class CacheCollector:
    """A prometheus_client collector of one response cache's fill and counts, read at scrape time."""

    def __init__(self, cache: ResponseCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache
        yield GaugeMetricFamily("nv_cache_util", "Cache utilization [0.0 - 1.0]", cache.used / max(cache.capacity, 1))
        yield GaugeMetricFamily("nv_cache_num_entries", "Number of responses stored in response cache", len(cache))
        yield GaugeMetricFamily("nv_cache_num_hits", "Number of cache hits in response cache", cache.hits)
        yield GaugeMetricFamily("nv_cache_num_misses", "Number of cache misses in response cache", cache.misses)
        yield GaugeMetricFamily("nv_cache_num_lookups", "Number of cache lookups in response cache", cache.lookups)
        yield GaugeMetricFamily(
            "nv_cache_num_evictions", "Number of cache evictions in response cache", cache.evictions
        )
        yield GaugeMetricFamily(
            "nv_cache_lookup_duration",
            "Total cache lookup duration (hit and miss), in microseconds",
            cache.lookup_ns // 1000,
        )
        yield GaugeMetricFamily(
            "nv_cache_insertion_duration", "Total cache insertion duration, in microseconds", cache.insertion_ns // 1000
        )
