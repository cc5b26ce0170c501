"""Per-model families, rendered at scrape time from each READY version's :class:`ModelStatistics`.

Nothing is registered per model: a version's series exist (at zero) while it is READY and vanish
once it unloads, because every scrape walks the lifecycle. Names, types, units and labels follow
Triton (metrics.md); families prefixed ``naiad_`` are naiad's own additions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from naiad.lifecycle import ModelLifecycle
from naiad.metrics.config import MetricsOptions
from naiad.metrics.exposition import format_value
from naiad.models import ServingModel
from naiad.statistics import FAILURE_REASONS, Duration, HistogramSnapshot, StatisticsSnapshot

_TAG_INVALID = re.compile(r"[^a-zA-Z0-9_]")

# (family, help, snapshot attribute) of the five duration counters (µs).
_DURATIONS = (
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        "success",
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        "queue",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        "compute_infer",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        "compute_output",
    ),
)

_SUMMARIES = (
    (
        "nv_inference_request_summary_us",
        "Summary of inference request duration in microseconds (includes cached requests)",
        "request",
    ),
    (
        "nv_inference_queue_summary_us",
        "Summary of inference queuing duration in microseconds (includes cached requests)",
        "queue",
    ),
    (
        "nv_inference_compute_input_summary_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input",
    ),
    (
        "nv_inference_compute_infer_summary_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        "compute_infer",
    ),
    (
        "nv_inference_compute_output_summary_us",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        "compute_output",
    ),
    (
        "nv_cache_hit_summary_per_model",
        "Summary of cache hit counts/durations per model, in microseconds.",
        "cache_hit",
    ),
    (
        "nv_cache_miss_summary_per_model",
        "Summary of cache miss counts/durations per model, in microseconds.",
        "cache_miss",
    ),
)


# (family, help, snapshot attribute, count or µs) of the response cache's per-model counters.
_CACHE_COUNTERS = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hit", "count"),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", "cache_hit", "us"),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_miss", "count"),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
        "cache_miss",
        "us",
    ),
)


@dataclass(frozen=True, slots=True)
class _Version:
    labels: dict[str, str]
    stats: StatisticsSnapshot
    max_batch_size: int
    decoupled: bool
    cache_enabled: bool  # its config enables response_cache


class ModelCollector:
    """A prometheus_client collector of every READY version's families."""

    def __init__(
        self,
        lifecycle: ModelLifecycle,
        options: MetricsOptions,
        gpu_uuid: Callable[[int], str | None] = lambda ordinal: None,
    ) -> None:
        self._lifecycle = lifecycle
        self._options = options
        self._gpu_uuid = gpu_uuid

    def _versions(self) -> list[_Version]:
        versions: list[_Version] = []
        serving = self._lifecycle.serving()
        for name in sorted(serving):
            for _, model in sorted(serving[name].by_version.items()):
                statistics = model.statistics
                if statistics is None:
                    continue
                versions.append(
                    _Version(
                        self._labels(model),
                        statistics.metric_counters(),
                        model.config.max_batch_size,
                        statistics.decoupled,
                        model.config.response_cache.enable,
                    )
                )
        return versions

    def _labels(self, model: ServingModel) -> dict[str, str]:
        labels = {"model": model.name, "version": str(model.version)}
        for key, value in model.config.metric_tags.items():
            labels["_" + _TAG_INVALID.sub("_", key)] = value
        statistics = model.statistics
        if statistics is not None and len(statistics.gpu_devices) == 1:
            uuid = self._gpu_uuid(next(iter(statistics.gpu_devices)))
            if uuid is not None:
                labels["gpu_uuid"] = uuid
        return labels

    def collect(self) -> Iterator[Metric]:
        versions = self._versions()
        options = self._options
        yield _family(
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            "counter",
            ((v.labels, v.stats.success.count) for v in versions),
        )
        failure = Metric(
            "nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "counter"
        )
        for version in versions:
            for reason in FAILURE_REASONS:
                failure.add_sample(failure.name, {**version.labels, "reason": reason}, version.stats.failures[reason])
        yield failure
        yield _family(
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            "counter",
            ((v.labels, v.stats.inference_count) for v in versions),
        )
        yield _family(
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            "counter",
            ((v.labels, v.stats.execution_count) for v in versions),
        )
        if options.counter_latencies:
            for name, documentation, attribute in _DURATIONS:
                yield _family(
                    name,
                    documentation,
                    "counter",
                    ((v.labels, getattr(v.stats, attribute).ns // 1000) for v in versions),
                )
        cached = [v for v in versions if v.cache_enabled]
        if cached and options.counter_latencies:
            for name, documentation, attribute, unit in _CACHE_COUNTERS:
                yield _family(
                    name, documentation, "counter", ((v.labels, _cache_value(v, attribute, unit)) for v in cached)
                )
        yield _family(
            "nv_inference_pending_request_count",
            "Instantaneous number of pending requests awaiting execution per-model.",
            "gauge",
            ((v.labels, v.stats.pending) for v in versions),
        )
        yield _family(
            "nv_model_load_duration_secs",
            "Model load time in seconds",
            "gauge",
            ((v.labels, v.stats.load_seconds) for v in versions),
        )
        if options.statistics.summary_latencies:
            yield from _summaries(versions)
        if options.statistics.histogram_latencies:
            yield _histogram(
                "nv_inference_first_response_histogram_ms",
                "Duration from request to first response in milliseconds",
                ((v.labels, v.stats.first_response_ms) for v in versions),
            )
        yield from self._naiad_families(versions)

    def _naiad_families(self, versions: list[_Version]) -> Iterator[Metric]:
        yield _family(
            "naiad_inference_queue_depth",
            "Requests a model version holds right now: waiting in its queue plus executing",
            "gauge",
            ((v.labels, v.stats.in_flight) for v in versions),
        )
        yield _histogram(
            "naiad_inference_batch_size",
            "Rows per model execution (the batch sizes the scheduler formed)",
            ((v.labels, _batch_histogram(v)) for v in versions),
        )
        streaming = [v for v in versions if v.decoupled]
        yield _histogram(
            "naiad_inference_time_to_first_response_seconds",
            "Decoupled models: time from request arrival to its first successful response, in seconds",
            ((v.labels, v.stats.time_to_first_response) for v in streaming),
        )
        yield _histogram(
            "naiad_inference_time_between_responses_seconds",
            "Decoupled models: time between consecutive successful responses of a request, in seconds",
            ((v.labels, v.stats.time_between_responses) for v in streaming),
        )


def _cache_value(version: _Version, attribute: str, unit: str) -> int:
    duration: Duration = getattr(version.stats, attribute)
    return duration.count if unit == "count" else duration.ns // 1000


def _family(name: str, documentation: str, kind: str, samples: Iterable[tuple[dict[str, str], float]]) -> Metric:
    family = Metric(name, documentation, kind)
    for labels, value in samples:
        family.add_sample(name, labels, value)
    return family


def _histogram(
    name: str, documentation: str, samples: Iterable[tuple[dict[str, str], HistogramSnapshot | None]]
) -> Metric:
    family = Metric(name, documentation, "histogram")
    for labels, histogram in samples:
        if histogram is None:
            continue
        family.add_sample(name + "_count", labels, histogram.count)  # prometheus-cpp's order
        family.add_sample(name + "_sum", labels, histogram.sum)
        for bound, count in zip((*histogram.bounds, float("inf")), histogram.cumulative, strict=True):
            family.add_sample(name + "_bucket", {**labels, "le": format_value(bound)}, count)
    return family


def _summaries(versions: list[_Version]) -> Iterator[Metric]:
    """The latency summaries; a version whose config enables the response cache has the cache's two
    instead of the request duration's, as in Triton."""
    for name, documentation, key in _SUMMARIES:
        family = Metric(name, documentation, "summary")
        for version in versions:
            summary = version.stats.summaries_us.get(key)
            if summary is None or not _summarized(version, key):
                continue
            family.add_sample(name + "_count", version.labels, summary.count)
            family.add_sample(name + "_sum", version.labels, summary.sum)
            for quantile, value in summary.quantiles:
                family.add_sample(name, {**version.labels, "quantile": repr(quantile)}, value)
        if family.samples or not key.startswith("cache_"):  # the cache's only where a model enables it
            yield family


def _summarized(version: _Version, key: str) -> bool:
    if key == "request":
        return not version.cache_enabled
    if key.startswith("cache_"):
        return version.cache_enabled
    return True


def _batch_histogram(version: _Version) -> HistogramSnapshot:
    """Executions by batch size, bucketed at powers of two up to ``max_batch_size``."""
    top = max(version.max_batch_size, 1)
    bounds: list[float] = []
    bound = 1
    while bound < top:
        bounds.append(float(bound))
        bound *= 2
    bounds.append(float(top))
    counts = [0] * (len(bounds) + 1)
    total = 0.0
    for batch in version.stats.batches:
        index = next((i for i, upper in enumerate(bounds) if batch.batch_size <= upper), len(bounds))
        counts[index] += batch.compute_infer.count
        total += batch.batch_size * batch.compute_infer.count
    cumulative: list[int] = []
    running = 0
    for count in counts:
        running += count
        cumulative.append(running)
    return HistogramSnapshot(tuple(bounds), tuple(cumulative), total)
