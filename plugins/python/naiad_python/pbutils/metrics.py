"""``pb_utils.MetricFamily`` and ``Metric``: custom metrics on the server's metrics endpoint.

They map onto the families of the calling model's server (``server.metrics``), exported with
exactly the given name and labels. As in Triton, where the server's registry merges families of
the same name and series of the same labels, instances and models that ask for the same family
or series share it. Each family and series belongs to the model unit (instance) that created
it; when the unit unloads, the series and families no other unit uses are dropped, so an
unloaded model's series leave ``/metrics`` and a model loaded again starts from zero.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from naiad.backend import Metric as ServerMetric
from naiad.backend import MetricFamily as ServerFamily
from naiad.backend import MetricKind as ServerKind
from naiad.backend import NaiadError
from naiad_python import loader
from naiad_python.pbutils.caller import calling_unit, server_of
from naiad_python.pbutils.errors import TritonModelException

_T = TypeVar("_T")


class MetricKind(enum.IntEnum):
    """Custom metric kinds (Triton's ``TRITONSERVER_MetricKind``)."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_SERVER_KINDS = {
    MetricKind.COUNTER: ServerKind.COUNTER,
    MetricKind.GAUGE: ServerKind.GAUGE,
    MetricKind.HISTOGRAM: ServerKind.HISTOGRAM,
}


class Metric:
    """One labelled series of a family: ``family.Metric(labels, buckets)``."""

    __slots__ = ("_metric",)

    def __init__(self, metric: ServerMetric) -> None:
        self._metric = metric

    def increment(self, value: float) -> None:
        """Add ``value`` to a counter (never negative) or gauge."""
        _call(self._metric.increment, value)

    def set(self, value: float) -> None:
        """Set a gauge to ``value``."""
        _call(self._metric.set, value)

    def observe(self, value: float) -> None:
        """Count ``value`` into a histogram."""
        _call(self._metric.observe, value)

    def value(self) -> float:
        """The current value of a counter or gauge."""
        return _call(self._metric.value)


class MetricFamily:
    """A custom metric family: ``MetricFamily(name, description, MetricFamily.COUNTER)``."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        if not isinstance(name, str) or not isinstance(description, str):
            raise TypeError("MetricFamily(): 'name' and 'description' must be str")
        try:
            server_kind = _SERVER_KINDS[MetricKind(kind)]
        except ValueError:
            raise TritonModelException(
                f"MetricFamily(): unknown metric kind {kind!r}; use MetricFamily.COUNTER, GAUGE or HISTOGRAM"
            ) from None
        self._unit = calling_unit("pb_utils.MetricFamily")
        server = server_of(self._unit, "pb_utils.MetricFamily")
        self._family = _shares.family(self._unit, lambda: server.metrics.family(name, description, server_kind))

    def Metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        """The series with ``labels``; a histogram needs ``buckets`` (its upper bounds)."""
        family = self._family
        return Metric(_shares.metric(self._unit, family, lambda: family.metric(labels, buckets)))


def _call(operation: Callable[..., _T], *args: float) -> _T:
    try:
        return operation(*args)
    except NaiadError as error:
        raise TritonModelException(error.message) from None


@dataclass
class _Holdings:
    """The families and series one unit uses."""

    families: set[ServerFamily] = field(default_factory=set)
    metrics: dict[ServerMetric, ServerFamily] = field(default_factory=dict)


class _Shares:
    """How many units use each server family and series; a unit's share goes when it unloads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: Counter[ServerFamily] = Counter()
        self._metrics: Counter[ServerMetric] = Counter()
        self._holdings: dict[loader.ModelUnit, _Holdings] = {}

    def family(self, unit: loader.ModelUnit, create: Callable[[], ServerFamily]) -> ServerFamily:
        """The family ``create`` gives (a new one or the server's existing one), now used by ``unit``."""
        with self._lock:
            holdings = self._holdings_of(unit)
            family = _call(create)
            if family not in holdings.families:
                holdings.families.add(family)
                self._families[family] += 1
            return family

    def metric(self, unit: loader.ModelUnit, family: ServerFamily, create: Callable[[], ServerMetric]) -> ServerMetric:
        """The series ``create`` gives, now used by ``unit``."""
        with self._lock:
            holdings = self._holdings_of(unit)
            metric = _call(create)
            if metric not in holdings.metrics:
                holdings.metrics[metric] = family
                self._metrics[metric] += 1
            return metric

    def _holdings_of(self, unit: loader.ModelUnit) -> _Holdings:
        holdings = self._holdings.get(unit)
        if holdings is None:
            if not loader.on_unload(unit, partial(self._release, unit)):
                raise TritonModelException(f"model '{unit.model_name}' has been unloaded; its custom metrics are gone")
            holdings = self._holdings[unit] = _Holdings()
        return holdings

    def _release(self, unit: loader.ModelUnit) -> None:
        """Drop ``unit``'s share: the series and families nobody else uses leave the export."""
        with self._lock:
            holdings = self._holdings.pop(unit)
            for metric, family in holdings.metrics.items():
                if _last(self._metrics, metric):
                    family.remove(metric)
            for family in holdings.families:
                if _last(self._families, family):
                    family.close()


def _last(counts: Counter[_T], key: _T) -> bool:
    """Count one user of ``key`` less; True when that was the last one."""
    counts[key] -= 1
    if counts[key] > 0:
        return False
    del counts[key]
    return True


_shares = _Shares()
