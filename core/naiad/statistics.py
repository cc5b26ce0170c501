"""Per-model-version statistics: the one source of truth behind the statistics extension and the metrics.

Every request the data plane queues gets a :class:`RequestTracker` on its sender; the version's
response pipeline runs :class:`StatisticsStage`, which sees each of its response events, and the
instance runner (:mod:`naiad.scheduling.execution`) tells :class:`ModelStatistics` when each
execution started and ended. Together they feed one :class:`ModelStatistics` per model version
without taking a lock on the request path: a finished request or execution is one small record
appended to a deque, folded into the counters when they are read. ``GET /v2/models/{m}/stats``,
gRPC ModelStatistics and the Prometheus families all render from :meth:`ModelStatistics.snapshot`.
(Decoupled models and latency histograms also take a lock per response event.)

What the numbers mean (times from ``time.monotonic_ns``; "the execution" is the ``execute`` call of
the batch that carried the request):

* ``queue``: request arrival -> start of the execution (scheduler queue, batch forming, rate limiter).
* ``compute_input``: start of the execution -> the compute start the backend reported
  (:meth:`naiad.inference.InferenceRequest.report_compute`); 0 for backends that report nothing.
* ``compute_output``: the compute end the backend reported -> end of the execution.
* ``compute_infer``: the rest of the execution; for a decoupled request whose final response comes
  after ``execute`` returned, it runs on until that final response.
* ``success.ns`` / ``fail.ns``: arrival -> the later of the final response and the end of the
  execution. For a successful request ``success = queue + compute_input + compute_infer + compute_output``.
* ``batch_stats``: per executed batch size (rows), one count per execution, its phases' times.

A request fails if any of its responses carries an error that fails it
(:attr:`naiad.inference.InferenceResponse.fails_request`: not an error the model answered with,
even for a request cancelled while the model ran it); the reason is ``CANCELED`` when it was
cancelled (or the error says CANCELLED), ``BACKEND`` when it reached an instance, ``REJECTED`` when the
scheduler refused it (queue full, queue timeout, unloading: UNAVAILABLE), else ``OTHER``. Requests
refused by validation before they are queued are not counted, as in Triton.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from naiad.cancellation import CancellationToken
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import Deliver, InferenceRequest, InferenceResponse, ResponseEvent, ResponseSender

FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
"""The ``reason`` label values of ``nv_inference_request_failure``, all present from load."""

DEFAULT_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.5, 0.05),
    (0.9, 0.01),
    (0.95, 0.001),
    (0.99, 0.001),
    (0.999, 0.001),
)
"""Triton's default ``summary_quantiles``: (quantile, allowed error)."""

FIRST_RESPONSE_BUCKETS_MS = (100.0, 500.0, 2000.0, 5000.0)
"""Triton's default buckets of ``nv_inference_first_response_histogram_ms``."""

RESPONSE_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Buckets of naiad's time-to-first-response and time-between-responses histograms (seconds)."""

SUMMARY_MAX_AGE_S = 60.0
"""Summaries' quantiles cover the observations of the last minute (prometheus-cpp's default)."""

_SUMMARY_WINDOW = 8192  # most observations a summary keeps for its quantiles


@dataclass(frozen=True, slots=True)
class StatisticsOptions:
    """Which optional latency families each model version keeps (``--metrics-config``)."""

    histogram_latencies: bool = False
    first_response_buckets_ms: tuple[float, ...] = FIRST_RESPONSE_BUCKETS_MS
    summary_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES
    response_latencies: bool = True


@dataclass(frozen=True, slots=True)
class Duration:
    """A ``$duration_stat``: how many and how long in total (nanoseconds)."""

    count: int = 0
    ns: int = 0

    def to_json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(frozen=True, slots=True)
class BatchStatistics:
    """Executions of one batch size."""

    batch_size: int
    compute_input: Duration
    compute_infer: Duration
    compute_output: Duration


@dataclass(frozen=True, slots=True)
class ResponseStatistics:
    """The responses at one index of decoupled requests (``response_stats``)."""

    compute_infer: Duration
    compute_output: Duration
    success: Duration
    fail: Duration
    empty_response: Duration
    cancel: Duration


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Upper bounds (without +Inf), cumulative counts (with +Inf last), sum and count."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    sum: float

    @property
    def count(self) -> int:
        return self.cumulative[-1]


@dataclass(frozen=True, slots=True)
class SummarySnapshot:
    """Quantile values over the recent window (NaN when empty), lifetime sum and count."""

    quantiles: tuple[tuple[float, float], ...]
    sum: float
    count: int


@dataclass(frozen=True, slots=True)
class StatisticsSnapshot:
    """Everything one model version has counted, at one moment."""

    name: str
    version: int
    last_inference_ms: int
    inference_count: int
    execution_count: int
    success: Duration
    fail: Duration
    queue: Duration
    compute_input: Duration
    compute_infer: Duration
    compute_output: Duration
    cache_hit: Duration
    cache_miss: Duration
    failures: dict[str, int]
    batches: tuple[BatchStatistics, ...]
    responses: tuple[ResponseStatistics, ...]
    pending: int
    in_flight: int
    load_seconds: float
    first_response_ms: HistogramSnapshot | None = None
    time_to_first_response: HistogramSnapshot | None = None
    time_between_responses: HistogramSnapshot | None = None
    summaries_us: dict[str, SummarySnapshot] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``model_stats`` entry of the statistics extension (every number a JSON integer)."""
        return {
            "name": self.name,
            "version": str(self.version),
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.to_json(),
                "fail": self.fail.to_json(),
                "queue": self.queue.to_json(),
                "compute_input": self.compute_input.to_json(),
                "compute_infer": self.compute_infer.to_json(),
                "compute_output": self.compute_output.to_json(),
                "cache_hit": self.cache_hit.to_json(),
                "cache_miss": self.cache_miss.to_json(),
            },
            "response_stats": {
                str(index): {
                    "compute_infer": stats.compute_infer.to_json(),
                    "compute_output": stats.compute_output.to_json(),
                    "success": stats.success.to_json(),
                    "fail": stats.fail.to_json(),
                    "empty_response": stats.empty_response.to_json(),
                    "cancel": stats.cancel.to_json(),
                }
                for index, stats in enumerate(self.responses)
            },
            "batch_stats": [
                {
                    "batch_size": batch.batch_size,
                    "compute_input": batch.compute_input.to_json(),
                    "compute_infer": batch.compute_infer.to_json(),
                    "compute_output": batch.compute_output.to_json(),
                }
                for batch in self.batches
            ],
            "memory_usage": [],
        }


class Histogram:
    """Prometheus-style buckets; update under the owner's lock."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(sorted(set(bounds)))
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def snapshot(self) -> HistogramSnapshot:
        cumulative: list[int] = []
        total = 0
        for count in self.counts:
            total += count
            cumulative.append(total)
        return HistogramSnapshot(self.bounds, tuple(cumulative), self.sum)


class Summary:
    """Quantiles over the last :data:`SUMMARY_MAX_AGE_S` seconds (exact over the kept window).

    Keeps at most the last 8192 observations of that window; ``sum`` and ``count`` are lifetime
    totals, as Prometheus summaries report them. Update under the owner's lock.
    """

    __slots__ = ("count", "sum", "window")

    def __init__(self) -> None:
        self.window: deque[tuple[int, float]] = deque(maxlen=_SUMMARY_WINDOW)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, now_ns: int) -> None:
        self.window.append((now_ns, value))
        self.count += 1
        self.sum += value

    def recent(self, now_ns: int) -> list[float]:
        horizon = now_ns - int(SUMMARY_MAX_AGE_S * 1e9)
        window = self.window
        while window and window[0][0] < horizon:
            window.popleft()
        return [value for _, value in window]


def quantile_values(values: list[float], quantiles: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Each quantile's value among ``values`` (nearest rank), NaN when there are none."""
    values.sort()
    n = len(values)
    if not n:
        return tuple((q, math.nan) for q, _ in quantiles)
    return tuple((q, values[min(n - 1, max(0, math.ceil(q * n) - 1))]) for q, _ in quantiles)


_SUMMARY_NAMES = ("request", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")

_now = time.monotonic_ns  # one global lookup on the request path
_MISSING = object()


class RequestTracker:
    """One queued request's progress, kept in its sender's ``tracker`` slot by :meth:`ModelStatistics.track`."""

    __slots__ = (
        "arrival_ns",
        "batch_size",
        "cancellation",
        "cancelled",
        "ended_ns",
        "error",
        "final_ns",
        "first_ns",
        "input_ns",
        "last_ns",
        "output_ns",
        "responses",
        "started_ns",
    )

    def __init__(self, request: InferenceRequest) -> None:
        self.arrival_ns = request.arrival_ns
        self.batch_size = request.batch_size
        self.cancellation: CancellationToken = request.sender.cancellation
        # started_ns: start of the execution that ran it (0: never started); ended_ns: its end;
        # final_ns: when the final flag went out; first_ns / last_ns: first successful and latest
        # response (decoupled models, histograms); responses: response events so far.
        self.started_ns = self.ended_ns = self.final_ns = self.input_ns = self.output_ns = 0
        self.first_ns = self.last_ns = self.responses = 0
        self.error: NaiadError | None = None
        self.cancelled = False  # it was cancelled when its error came (not by its failure's consequences)


class StatisticsStage:
    """The response-pipeline stage that counts each tracked request's events."""

    def __init__(self, stats: ModelStatistics) -> None:
        self._stats = stats

    def bind(self, forward: Deliver) -> Deliver:
        stats = self._stats

        def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
            tracker = sender.tracker
            if tracker is not None:
                response = event.response
                if response is not None and _fails(response):
                    tracker.error = response.error
                    tracker.cancelled = tracker.cancellation.cancelled
                if stats.per_response:
                    stats.response_event(tracker, event)
                if event.final:
                    # Whichever comes second, this final flag or the end of the execution, counts the
                    # request. Both sides store their own mark before reading the other's, so (with
                    # the GIL's sequential consistency) at least one sees both; complete() counts once.
                    tracker.final_ns = _now()
                    if not tracker.started_ns or tracker.ended_ns:
                        stats.complete(tracker)
            forward(sender, event)

        return deliver


def _fails(response: InferenceResponse) -> bool:
    """Whether a response fails its request: an error does unless the model answered with it, as
    Triton's python backend counts them, a request cancelled while the model ran included (the
    model served it; one cancelled before it reached the model is failed by naiad's own error)."""
    return response.error is not None and response.fails_request


def _with_counters_of(snapshot: StatisticsSnapshot, other: StatisticsSnapshot | None) -> StatisticsSnapshot:
    """``snapshot`` with the counters (counts and total times) of ``other`` added."""
    if other is None:
        return snapshot

    def add(first: Duration, second: Duration) -> Duration:
        return Duration(first.count + second.count, first.ns + second.ns)

    return replace(
        snapshot,
        inference_count=snapshot.inference_count + other.inference_count,
        execution_count=snapshot.execution_count + other.execution_count,
        failures={reason: count + other.failures.get(reason, 0) for reason, count in snapshot.failures.items()},
        success=add(snapshot.success, other.success),
        fail=add(snapshot.fail, other.fail),
        queue=add(snapshot.queue, other.queue),
        compute_input=add(snapshot.compute_input, other.compute_input),
        compute_infer=add(snapshot.compute_infer, other.compute_infer),
        compute_output=add(snapshot.compute_output, other.compute_output),
        cache_hit=add(snapshot.cache_hit, other.cache_hit),
        cache_miss=add(snapshot.cache_miss, other.cache_miss),
    )


def _whole_us(ns: int) -> int:
    """Nanoseconds as whole microseconds, the unit of Triton's summaries."""
    return ns // 1000


_FOLD_AT = 4096  # records waiting before the thread that adds one folds them into the counters


class ModelStatistics:
    """Counters of one model version; see the module docstring for what each one means.

    The request path takes no lock: finished requests and executions are appended as small
    records to two deques (thread-safe appends) and folded into the counters by whoever reads
    them (:meth:`snapshot`), or by the request path once 4096 records wait.
    """

    def __init__(
        self,
        name: str,
        version: int,
        *,
        decoupled: bool = False,
        options: StatisticsOptions | None = None,
        first_response_buckets_ms: Sequence[float] | None = None,
    ) -> None:
        options = options or StatisticsOptions()
        self.name = name
        self.version = version
        self.decoupled = decoupled
        self.options = options
        self.load_seconds = 0.0
        self.gpu_devices: set[int] = set()  # GPU ordinals of its KIND_GPU instances
        # /metrics counters go on across reloads, as Triton's do (the statistics extension starts
        # again from zero): the version this one replaced, whose last requests may still finish, and
        # the frozen totals of those before it.
        self._replaced: ModelStatistics | None = None
        self._carried: StatisticsSnapshot | None = None
        self.lock = threading.Lock()  # guards the counters (folding, snapshots, per-response counts)
        self.open_requests: dict[RequestTracker, None] = {}  # tracked, not yet counted
        # (arrival, started, end, input ns, output ns, batch size, failure reason or None)
        self._finished: deque[tuple[int, int, int, int, int, int, str | None]] = deque()
        self._executions: deque[tuple[int, int, int, int]] = deque()  # (size, input, infer, output ns)
        # response cache: (arrival, lookup start, end) of each hit; ns of each miss's lookup and insert
        self._cache_hits: deque[tuple[int, int, int]] = deque()
        self._cache_misses: deque[tuple[int, int]] = deque()  # (when, ns)
        self.cache_hit_count = 0
        self.cache_hit_ns = 0
        self.cache_miss_count = 0
        self.cache_miss_ns = 0
        self.inference_count = 0
        self.execution_count = 0
        self.success_count = 0
        self.success_ns = 0
        self.fail_count = 0
        self.fail_ns = 0
        self.queue_ns = 0
        self.compute_input_ns = 0
        self.compute_infer_ns = 0
        self.compute_output_ns = 0
        self.failures = dict.fromkeys(FAILURE_REASONS, 0)
        self._batches: dict[int, list[int]] = {}  # size -> [count, input ns, infer ns, output ns]
        # decoupled: per response index [success n, ns, fail n, ns, empty n, ns, cancel n, ns]
        self._responses: list[list[int]] = []
        self._first_response_ms = (
            Histogram(first_response_buckets_ms or options.first_response_buckets_ms)
            if options.histogram_latencies
            else None
        )
        streaming = decoupled and options.response_latencies
        self._ttfr = Histogram(RESPONSE_BUCKETS_S) if streaming else None
        self._tbr = Histogram(RESPONSE_BUCKETS_S) if streaming else None
        self._summaries = {key: Summary() for key in _SUMMARY_NAMES} if options.summary_latencies else None
        # Whether every response event (not only the final one) needs counting.
        self.per_response = decoupled or self._first_response_ms is not None
        self._last_end_ns = 0  # monotonic time of the latest completion (-> last_inference)

    # -- the request path ----------------------------------------------------------------------

    def stage(self) -> StatisticsStage:
        """This version's stage of the response pipeline."""
        return StatisticsStage(self)

    def track(self, request: InferenceRequest) -> RequestTracker:
        """Follow a request about to be queued (call before handing it to the scheduler)."""
        tracker = RequestTracker(request)
        request.sender.tracker = tracker
        self.open_requests[tracker] = None  # one dict store: atomic, no lock needed
        return tracker

    def forget(self, tracker: RequestTracker) -> None:
        """The scheduler found the request invalid: it is not counted, as validation failures are not."""
        self.open_requests.pop(tracker, None)

    def refused(self, tracker: RequestTracker, error: NaiadError) -> None:
        """The scheduler refused the request outright (``submit`` raised)."""
        tracker.error = error
        tracker.cancelled = tracker.cancellation.cancelled
        tracker.final_ns = time.monotonic_ns()
        self.complete(tracker)

    def response_event(self, tracker: RequestTracker, event: ResponseEvent) -> None:
        """Any response event of a decoupled request (or of any request, with latency histograms)."""
        now = time.monotonic_ns()
        response = event.response
        ok = response is not None and response.error is None
        with self.lock:
            if ok and not tracker.first_ns:
                tracker.first_ns = now
                since_arrival = now - tracker.arrival_ns
                if self._first_response_ms is not None:
                    self._first_response_ms.observe(since_arrival / 1e6)
                if self._ttfr is not None:
                    self._ttfr.observe(since_arrival / 1e9)
            elif ok and self._tbr is not None:
                self._tbr.observe((now - tracker.last_ns) / 1e9)
            if self.decoupled:
                # response_stats: one index per event; time since the previous one (or the start)
                index = tracker.responses
                tracker.responses += 1
                while len(self._responses) <= index:
                    self._responses.append([0] * 8)
                since = now - (tracker.last_ns or tracker.started_ns or now)
                slot = 0 if ok else 6 if tracker.cancellation.cancelled else 4 if response is None else 2
                row = self._responses[index]
                row[slot] += 1
                row[slot + 1] += max(since, 0)
            tracker.last_ns = now

    def cache_hit(self, request: InferenceRequest, lookup_ns: int, end_ns: int) -> None:
        """The response cache answered ``request``: its lookup started at ``lookup_ns`` and the
        response was ready at ``end_ns``. A success with its queue time, without compute, inference
        or a new ``last_inference`` (as Triton counts a hit)."""
        self._cache_hits.append((request.arrival_ns, lookup_ns, end_ns))
        self._fold_if_long(self._cache_hits)

    def cache_missed(self, duration_ns: int) -> None:
        """The response cache did not hold a request's response; looking and storing took ``duration_ns``."""
        self._cache_misses.append((time.monotonic_ns(), duration_ns))
        self._fold_if_long(self._cache_misses)

    def started(self, requests: Sequence[InferenceRequest], now: int) -> None:
        """An execution of ``requests`` starts (each store is atomic; no lock)."""
        for request in requests:
            tracker = request.sender.tracker
            if tracker is not None:
                tracker.started_ns = now

    def executed(self, requests: Sequence[InferenceRequest], start: int, end: int) -> None:
        """The execution of ``requests`` that started at ``start`` returned at ``end``.

        The compute phases come from what the backend reported on each request; the batch's are
        its earliest compute start and latest compute end.
        """
        size = 0
        compute_start = end
        compute_end = start
        for request in requests:
            size += request.batch_size
            input_ns = output_ns = 0
            if start <= request.compute_start_ns <= request.compute_end_ns <= end:
                input_ns = request.compute_start_ns - start
                output_ns = end - request.compute_end_ns
                compute_start = min(compute_start, request.compute_start_ns)
                compute_end = max(compute_end, request.compute_end_ns)
            tracker = request.sender.tracker
            if tracker is not None:
                tracker.input_ns = input_ns
                tracker.output_ns = output_ns
                tracker.ended_ns = end  # after the phases: a final flag that sees it counts them
                if tracker.final_ns:
                    self.complete(tracker)
        if compute_start > compute_end:  # nothing reported: the whole execution is compute
            compute_start, compute_end = start, end
        input_ns = compute_start - start
        output_ns = end - compute_end
        self._executions.append((size, input_ns, end - start - input_ns - output_ns, output_ns))

    def complete(self, tracker: RequestTracker) -> None:
        """Record a finished request once: its final flag went out and its execution (if any) ended."""
        if self.open_requests.pop(tracker, _MISSING) is _MISSING:
            return  # the other side counted it (dict.pop is atomic: exactly one wins)
        final, ended = tracker.final_ns, tracker.ended_ns
        end = final if final > ended else ended
        if ended:  # as Triton, only a request that was executed is an inference (a failed ensemble is not)
            self._last_end_ns = end
        error = tracker.error
        record: tuple[int, int, int, int, int, int, str | None]
        if error is None:
            record = (
                tracker.arrival_ns,
                tracker.started_ns,
                end,
                tracker.input_ns,
                tracker.output_ns,
                tracker.batch_size,
                None,
            )
        else:
            # cancelled before its error came: an ensemble or BLS caller cancelling the rest of its
            # work because this step failed does not make this failure a cancellation
            if error.code is ErrorCode.CANCELLED or tracker.cancelled:
                reason = "CANCELED"
            elif tracker.started_ns:
                reason = "BACKEND"
            elif error.code is ErrorCode.UNAVAILABLE:
                reason = "REJECTED"
            else:
                reason = "OTHER"
            record = (tracker.arrival_ns, 0, end, 0, 0, 0, reason)
        self._finished.append(record)
        self._fold_if_long(self._finished)

    def _fold_if_long(self, records: deque[Any]) -> None:
        """Fold the waiting records into the counters once ``records`` holds many, unless a reader is at it."""
        if len(records) > _FOLD_AT and self.lock.acquire(blocking=False):
            try:
                self._fold()
            finally:
                self.lock.release()

    def _fold(self) -> None:
        """Move waiting records into the counters (lock held)."""
        executions = self._executions
        batches = self._batches
        while executions:
            size, input_ns, infer_ns, output_ns = executions.popleft()
            self.execution_count += 1
            batch = batches.get(size)
            if batch is None:
                batch = batches[size] = [0, 0, 0, 0]
            batch[0] += 1
            batch[1] += input_ns
            batch[2] += infer_ns
            batch[3] += output_ns
        summaries = self._summaries
        hits = self._cache_hits
        while hits:
            arrival, lookup, end = hits.popleft()
            self.cache_hit_count += 1
            self.cache_hit_ns += end - lookup
            self.success_count += 1
            self.success_ns += end - arrival
            self.queue_ns += lookup - arrival
            if summaries is not None:
                summaries["queue"].observe(_whole_us(lookup - arrival), end)
                summaries["cache_hit"].observe(_whole_us(end - lookup), end)
        misses = self._cache_misses
        while misses:
            end, duration = misses.popleft()
            self.cache_miss_count += 1
            self.cache_miss_ns += duration
            if summaries is not None:
                summaries["cache_miss"].observe(_whole_us(duration), end)
        finished = self._finished
        while finished:
            arrival, started, end, input_ns, output_ns, batch_size, reason = finished.popleft()
            duration = end - arrival
            if reason is not None:
                self.failures[reason] += 1
                self.fail_count += 1
                self.fail_ns += duration
                continue
            queue = (started or end) - arrival
            infer = end - (started or end) - input_ns - output_ns
            self.success_count += 1
            self.success_ns += duration
            self.queue_ns += queue
            self.compute_input_ns += input_ns
            self.compute_infer_ns += infer
            self.compute_output_ns += output_ns
            self.inference_count += batch_size
            if summaries is not None:
                summaries["request"].observe(_whole_us(duration), end)
                summaries["queue"].observe(_whole_us(queue), end)
                summaries["compute_input"].observe(_whole_us(input_ns), end)
                summaries["compute_infer"].observe(_whole_us(infer), end)
                summaries["compute_output"].observe(_whole_us(output_ns), end)

    # -- reading -------------------------------------------------------------------------------

    def _last_inference_ms(self) -> int:
        """Wall-clock ms of the latest completion (0: none), from its monotonic time."""
        if not self._last_end_ns:
            return 0
        return (time.time_ns() - (time.monotonic_ns() - self._last_end_ns)) // 1_000_000

    def follow(self, replaced: ModelStatistics) -> None:
        """Count on, in /metrics, from the statistics of the version this one replaces in a reload.

        Only that version stays referenced; the ones before it, done with their requests by now,
        are folded into frozen totals.
        """
        before = replaced._replaced
        self._carried = _with_counters_of(before.snapshot(), replaced._carried) if before else replaced._carried
        self._replaced = replaced
        replaced._replaced = replaced._carried = None  # it serves no more: nothing asks it for metrics

    def metric_counters(self) -> StatisticsSnapshot:
        """A snapshot whose counters include those of the versions this one replaced in reloads."""
        snapshot = _with_counters_of(self.snapshot(), self._carried)
        return snapshot if self._replaced is None else _with_counters_of(snapshot, self._replaced.snapshot())

    def snapshot(self) -> StatisticsSnapshot:
        """A consistent copy of every counter."""
        now = time.monotonic_ns()
        summary_values: dict[str, tuple[list[float], float, int]] = {}
        # Requests in flight, and those of them no instance has started yet (the queue).
        open_trackers = list(self.open_requests)
        pending = sum(1 for tracker in open_trackers if not tracker.started_ns)
        with self.lock:
            self._fold()
            compute_count = self.success_count - self.cache_hit_count
            batches = tuple(
                BatchStatistics(
                    size,
                    Duration(counts[0], counts[1]),
                    Duration(counts[0], counts[2]),
                    Duration(counts[0], counts[3]),
                )
                for size, counts in sorted(self._batches.items())
            )
            responses = tuple(
                ResponseStatistics(
                    compute_infer=Duration(row[0], row[1]),
                    compute_output=Duration(row[0], 0),
                    success=Duration(row[0], row[1]),
                    fail=Duration(row[2], row[3]),
                    empty_response=Duration(row[4], row[5]),
                    cancel=Duration(row[6], row[7]),
                )
                for row in self._responses
            )
            if self._summaries is not None:
                summary_values = {
                    key: (summary.recent(now), summary.sum, summary.count) for key, summary in self._summaries.items()
                }
            snapshot = StatisticsSnapshot(
                name=self.name,
                version=self.version,
                last_inference_ms=self._last_inference_ms(),
                inference_count=self.inference_count,
                execution_count=self.execution_count,
                success=Duration(self.success_count, self.success_ns),
                fail=Duration(self.fail_count, self.fail_ns),
                queue=Duration(self.success_count, self.queue_ns),
                compute_input=Duration(compute_count, self.compute_input_ns),
                compute_infer=Duration(compute_count, self.compute_infer_ns),
                compute_output=Duration(compute_count, self.compute_output_ns),
                cache_hit=Duration(self.cache_hit_count, self.cache_hit_ns),
                cache_miss=Duration(self.cache_miss_count, self.cache_miss_ns),
                failures=dict(self.failures),
                batches=batches,
                responses=responses,
                pending=pending,
                in_flight=len(open_trackers),
                load_seconds=self.load_seconds,
                first_response_ms=None if self._first_response_ms is None else self._first_response_ms.snapshot(),
                time_to_first_response=None if self._ttfr is None else self._ttfr.snapshot(),
                time_between_responses=None if self._tbr is None else self._tbr.snapshot(),
            )
        for key, (values, total, count) in summary_values.items():
            snapshot.summaries_us[key] = SummarySnapshot(
                quantile_values(values, self.options.summary_quantiles), total, count
            )
        return snapshot
