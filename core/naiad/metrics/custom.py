"""Custom metrics: families a backend or model registers, exported next to Triton's on ``/metrics``.

The shape is Triton's custom-metrics API (``TRITONSERVER_MetricFamilyNew`` / ``MetricNew``, and
``pb_utils.MetricFamily`` in python models): a *family* has a name, a description and a kind; a
*metric* is one labelled series of it. Names are exported exactly as given (``vllm:num_requests``
stays that, counters get no ``_total``). A family lives until it is closed, which a backend does
when its model unloads.
"""

from __future__ import annotations

import bisect
import enum
import itertools
import math
import re
import threading
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client.metrics_core import Metric as PrometheusFamily

from naiad.errors import ErrorCode, NaiadError, invalid_arg
from naiad.metrics.exposition import format_value

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RESERVED_PREFIXES = ("nv_", "naiad_")


class MetricKind(enum.Enum):
    """What a family counts (Triton's ``TRITONSERVER_MetricKind``)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Metric:
    """One labelled series of a family; thread-safe."""

    __slots__ = ("_bounds", "_counts", "_family", "_lock", "_sum", "_value", "labels")

    def __init__(self, family: MetricFamily, labels: dict[str, str], buckets: Sequence[float] | None) -> None:
        self._family = family
        self.labels = labels
        self._lock = threading.Lock()
        self._value = 0.0
        self._bounds = tuple(buckets) if buckets is not None else ()
        self._counts = [0] * (len(self._bounds) + 1)
        self._sum = 0.0

    @property
    def kind(self) -> MetricKind:
        return self._family.kind

    def increment(self, value: float = 1.0) -> None:
        """Add ``value``; a counter only goes up."""
        self._check_not(MetricKind.HISTOGRAM, "increment")
        if self.kind is MetricKind.COUNTER and value < 0:
            raise invalid_arg(f"counter '{self._family.name}' cannot be incremented by a negative value ({value})")
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        """Set a gauge to ``value``."""
        if self.kind is not MetricKind.GAUGE:
            raise invalid_arg(f"metric '{self._family.name}' is a {self.kind.value}; only a gauge can be set")
        with self._lock:
            self._value = value

    def observe(self, value: float) -> None:
        """Count ``value`` into a histogram's buckets."""
        if self.kind is not MetricKind.HISTOGRAM:
            raise invalid_arg(f"metric '{self._family.name}' is a {self.kind.value}; only a histogram observes values")
        with self._lock:
            self._counts[bisect.bisect_left(self._bounds, value)] += 1
            self._sum += value

    def value(self) -> float:
        """The current value of a counter or gauge."""
        self._check_not(MetricKind.HISTOGRAM, "value")
        with self._lock:
            return self._value

    def _check_not(self, kind: MetricKind, operation: str) -> None:
        if self.kind is kind:
            raise invalid_arg(f"metric '{self._family.name}' is a {kind.value}, which has no {operation}()")

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        name = self._family.name
        with self._lock:
            if self.kind is not MetricKind.HISTOGRAM:
                return [(name, self.labels, self._value)]
            counts, total = list(self._counts), self._sum
        # As prometheus-cpp writes a histogram: count, sum, then the buckets, ``le`` as short as it goes.
        buckets: list[tuple[str, dict[str, str], float]] = []
        running = 0
        for bound, count in zip((*self._bounds, math.inf), counts, strict=True):
            running += count
            buckets.append((name + "_bucket", {**self.labels, "le": format_value(bound)}, running))
        return [(name + "_count", self.labels, running), (name + "_sum", self.labels, total), *buckets]


class MetricFamily:
    """A named family of series; :meth:`metric` gives the series for one set of labels."""

    def __init__(self, registry: CustomMetrics, name: str, description: str, kind: MetricKind) -> None:
        self._registry = registry
        self.name = name
        self.description = description
        self.kind = kind
        self._metrics: dict[tuple[tuple[str, str], ...], Metric] = {}
        self._lock = threading.Lock()

    def metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        """The series with ``labels`` (created on first use); histograms need ``buckets``."""
        labels = dict(labels or {})
        for label, value in labels.items():
            if not isinstance(label, str) or not _LABEL.fullmatch(label) or not isinstance(value, str):
                raise invalid_arg(
                    f"metric family '{self.name}': label {label!r}={value!r} is invalid; label names match "
                    "[a-zA-Z_][a-zA-Z0-9_]* and values are strings"
                )
        if (self.kind is MetricKind.HISTOGRAM) != (buckets is not None):
            need = "needs" if self.kind is MetricKind.HISTOGRAM else "takes no"
            raise invalid_arg(f"metric family '{self.name}' is a {self.kind.value} and {need} buckets")
        if buckets is not None and any(low >= high for low, high in itertools.pairwise(buckets)):
            raise invalid_arg(
                f"metric family '{self.name}': bucket boundaries must be strictly sorted, got {list(buckets)}"
            )
        key = tuple(sorted(labels.items()))
        with self._lock:
            metric = self._metrics.get(key)
            if metric is None:
                metric = self._metrics[key] = Metric(self, labels, buckets)
            return metric

    def remove(self, metric: Metric) -> None:
        """Drop one series from the export."""
        with self._lock:
            self._metrics.pop(tuple(sorted(metric.labels.items())), None)

    def close(self) -> None:
        """Stop exporting the family and all its series."""
        self._registry.remove(self)

    def collect(self) -> PrometheusFamily:
        family = PrometheusFamily(self.name, self.description, self.kind.value)
        with self._lock:
            metrics = list(self._metrics.values())
        for metric in metrics:
            for sample_name, labels, value in metric.samples():
                family.add_sample(sample_name, labels, value)
        return family


class CustomMetrics:
    """Every custom family of one server; a prometheus_client collector of its registry."""

    def __init__(self) -> None:
        self._families: dict[str, MetricFamily] = {}
        self._lock = threading.Lock()

    def family(
        self, name: str, description: str, kind: MetricKind | str, *, backend: str | None = None
    ) -> MetricFamily:
        """A new family, or the existing one of that name if it has the same kind.

        ``backend``: a backend's own family, named ``naiad_<backend>_...`` (the server's prefix, in the
        backend's namespace), e.g. the python backend's count of worker restarts.
        """
        kind = kind if isinstance(kind, MetricKind) else MetricKind(str(kind).lower())
        if not _NAME.fullmatch(name):
            raise invalid_arg(f"metric family name '{name}' is invalid; names match [a-zA-Z_:][a-zA-Z0-9_:]*")
        if backend is not None and not name.startswith(f"naiad_{backend}_"):
            raise invalid_arg(f"metric family name '{name}' of backend '{backend}' must start with 'naiad_{backend}_'")
        if backend is None and name.startswith(_RESERVED_PREFIXES):
            raise invalid_arg(
                f"metric family name '{name}' starts with a prefix reserved for the server's own families "
                f"({', '.join(_RESERVED_PREFIXES)}); choose another name"
            )
        with self._lock:
            existing = self._families.get(name)
            if existing is not None:
                if existing.kind is not kind:
                    raise NaiadError(
                        f"metric family '{name}' already exists as a {existing.kind.value}, not a {kind.value}",
                        ErrorCode.ALREADY_EXISTS,
                    )
                return existing
            family = self._families[name] = MetricFamily(self, name, description, kind)
            return family

    def remove(self, family: MetricFamily) -> None:
        with self._lock:
            if self._families.get(family.name) is family:
                del self._families[family.name]

    def collect(self) -> Iterator[PrometheusFamily]:
        with self._lock:
            families = list(self._families.values())
        for family in families:
            yield family.collect()
