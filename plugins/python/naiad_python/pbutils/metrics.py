"""``pb_utils.MetricFamily`` and ``Metric``: custom metrics on the server's metrics endpoint.

They map onto the families of the calling model's server (``server.metrics``), exported with
exactly the given name and labels. As in Triton, where the server's registry merges families of
the same name and series of the same labels, instances and models that ask for the same family
or series share it. Each family and series belongs to the model unit (instance) that created
it; when the unit unloads, the series and families no other unit uses are dropped, so an
unloaded model's series leave ``/metrics`` and a model loaded again starts from zero. An instance in a
worker process holds its share in the server, through the same :data:`shares`, until it unloads.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

from naiad.backend import Metric as ServerMetric
from naiad.backend import MetricFamily as ServerFamily
from naiad.backend import MetricKind as ServerKind
from naiad.backend import NaiadError
from naiad_python import loader
from naiad_python.pbutils.caller import calling_unit, server_of
from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.text import text

_T = TypeVar("_T")

Subscribe = Callable[[Callable[[], None]], bool]
"""Registers what to run when an owner of shares goes away; False when it is already gone."""


class Owner(Hashable, Protocol):
    """What holds shares: a model unit, or the server side of an instance in a worker process."""

    model_name: str


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
        name, description = text(name, "MetricFamily(): 'name'"), text(description, "MetricFamily(): 'description'")
        try:
            server_kind = _SERVER_KINDS[MetricKind(kind)]
        except ValueError:
            raise TritonModelException(
                f"MetricFamily(): unknown metric kind {kind!r}; use MetricFamily.COUNTER, GAUGE or HISTOGRAM"
            ) from None
        self._unit = calling_unit("pb_utils.MetricFamily")
        server = server_of(self._unit, "pb_utils.MetricFamily")
        self._subscribe: Subscribe = partial(loader.on_unload, self._unit)
        self._family = shares.family(
            self._unit, self._subscribe, lambda: server.metrics.family(name, description, server_kind)
        )

    def Metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        """The series with ``labels``; a histogram needs ``buckets`` (its upper bounds, strictly sorted)."""
        if labels is not None and not isinstance(labels, Mapping):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        family = self._family
        return Metric(shares.metric(self._unit, self._subscribe, family, lambda: family.metric(labels, buckets)))


def _call(operation: Callable[..., _T], *args: float) -> _T:
    try:
        return operation(*args)
    except NaiadError as error:
        raise TritonModelException(error.message) from None


@dataclass
class _Holdings:
    """The families and series one owner (a unit, or an instance in a worker process) uses."""

    families: set[ServerFamily] = field(default_factory=set)
    metrics: dict[ServerMetric, ServerFamily] = field(default_factory=dict)


class MetricShares:
    """How many owners use each server family and series; an owner's share goes when it does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: Counter[ServerFamily] = Counter()
        self._metrics: Counter[ServerMetric] = Counter()
        self._holdings: dict[Owner, _Holdings] = {}

    def family(self, owner: Owner, subscribe: Subscribe, create: Callable[[], ServerFamily]) -> ServerFamily:
        """The family ``create`` gives (a new one or the server's existing one), now used by ``owner``."""
        with self._lock:
            holdings = self._holdings_of(owner, subscribe)
            family = _call(create)
            if family not in holdings.families:
                holdings.families.add(family)
                self._families[family] += 1
            return family

    def metric(
        self, owner: Owner, subscribe: Subscribe, family: ServerFamily, create: Callable[[], ServerMetric]
    ) -> ServerMetric:
        """The series ``create`` gives, now used by ``owner``."""
        with self._lock:
            holdings = self._holdings_of(owner, subscribe)
            metric = _call(create)
            if metric not in holdings.metrics:
                holdings.metrics[metric] = family
                self._metrics[metric] += 1
            return metric

    def _holdings_of(self, owner: Owner, subscribe: Subscribe) -> _Holdings:
        holdings = self._holdings.get(owner)
        if holdings is None:
            if not subscribe(partial(self._release, owner)):
                raise TritonModelException(f"model '{owner.model_name}' has been unloaded; its custom metrics are gone")
            holdings = self._holdings[owner] = _Holdings()
        return holdings

    def _release(self, owner: Owner) -> None:
        """Drop ``owner``'s share: the series and families nobody else uses leave the export."""
        with self._lock:
            holdings = self._holdings.pop(owner)
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


shares = MetricShares()
