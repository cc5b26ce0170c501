"""Protocol-neutral inference requests, responses and the response sender.

Whoever submits a request (a frontend, a backend calling another model, an embedding program)
hands :meth:`naiad.service.InferenceService.submit` its inputs and a response sink; the scheduler
hands batches of the resulting :class:`InferenceRequest` objects to a backend instance, and the
backend answers each request through ``request.sender``, possibly from another thread and possibly
many times (decoupled models). Each response then passes the model version's response pipeline
(:mod:`naiad.pipeline`) on its way to the sink.

The request holds its sender; the sender holds nothing of the request (its cancellation token is
shared, not reached through a back-reference), so a finished request is freed by reference counting
alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from naiad.cancellation import CancellationToken
from naiad.errors import ErrorCode, NaiadError
from naiad.tensor import Tensor

if TYPE_CHECKING:
    from naiad.statistics import RequestTracker
    from naiad.tracing import RequestTrace

ParameterValue = str | int | float | bool

# Request flags (``TRITONSERVER_RequestFlag``).
SEQUENCE_START = 1
SEQUENCE_END = 2


class OutputDestination(Protocol):
    """A caller's memory a requested output is written into (a buffer, a shared-memory region).

    The response pipeline calls :meth:`write` on the thread that sent the response, before the
    response reaches its sink; a failed write fails the response.
    """

    def write(self, tensor: Tensor) -> None:
        """Copy ``tensor`` into the destination; raise :class:`NaiadError` if it does not fit."""

    def parameters(self) -> Mapping[str, ParameterValue]:
        """Where the data went, as a response reports it in place of the data (a region's name and size)."""


@dataclass(frozen=True, slots=True)
class RequestedOutput:
    """One output a request asks for, and how it wants it.

    ``binary`` is HTTP's ``binary_data`` (None: the request's ``binary_data_output`` default);
    ``classification`` asks for the top-k classes instead of the tensor (0: the tensor itself);
    ``destination`` receives the data instead of the response body.
    """

    name: str
    binary: bool | None = None
    classification: int = 0
    destination: OutputDestination | None = None


@dataclass(frozen=True, slots=True)
class Scheduling:
    """What a request asks of the server rather than of its model: its sequence, priority and timeout.

    Frontends read these from the request's reserved parameters (``sequence_id``, ``sequence_start``,
    ``sequence_end``, ``priority``, ``timeout``); an in-process caller (BLS, an ensemble step) passes
    them apart, so that every one of its parameters reaches the model as it is (the service checks
    what such a caller passes).
    """

    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0


@dataclass(slots=True)
class InferenceResponse:
    """One response: output tensors, or an error, plus optional response parameters.

    An error fails its request in the statistics unless ``fails_request`` is False: a backend whose
    model answered with an error as its result sets that (Triton's python backend counts such a
    request as a success and fails only those whose ``execute`` raised).
    """

    outputs: list[Tensor] = field(default_factory=list)
    error: NaiadError | None = None
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    fails_request: bool = True


@dataclass(slots=True)
class ResponseEvent:
    """What a sender delivers: a response (or ``None`` for a flag-only final) and the final flag."""

    response: InferenceResponse | None
    final: bool


class ResponseSink(Protocol):
    """Receives the response events of one request, from any thread (see :mod:`naiad.sinks`)."""

    def deliver(self, event: ResponseEvent) -> None: ...


Deliver = Callable[["ResponseSender", ResponseEvent], None]
"""A response pipeline: takes a sender and one of its events, ends by calling ``sender.sink``."""


def to_sink(sender: ResponseSender, event: ResponseEvent) -> None:
    """The end of every response pipeline."""
    trace = sender.trace
    if trace is not None:  # released to the frontend now: Triton's stamps come before the frontend's
        if event.response is not None:
            trace.released()
        if event.final:
            trace.final_sent()
    sender.sink.deliver(event)


class ResponseSender:
    """Sends one request's responses into its model version's response pipeline; thread-safe.

    ``send`` may be called any number of times; the request is complete after the call with
    ``final=True``. Calls after that raise, as in Triton's python backend. The slots after
    ``cancellation`` carry each pipeline stage's per-request state.
    """

    __slots__ = (
        "_closed",
        "_lock",
        "_pipeline",
        "cache_key",
        "cancellation",
        "client_outputs",
        "output_options",
        "place",
        "sink",
        "state_slot",
        "trace",
        "tracker",
    )

    def __init__(
        self,
        sink: ResponseSink | Callable[[ResponseEvent], None],
        pipeline: Deliver = to_sink,
        cancellation: CancellationToken | None = None,
    ) -> None:
        self.sink: ResponseSink = sink if hasattr(sink, "deliver") else _CallableSink(sink)
        self._pipeline = pipeline
        self._closed = False
        self._lock = threading.Lock()
        self.cancellation = cancellation or CancellationToken()
        self.tracker: RequestTracker | None = None  # statistics
        self.trace: RequestTrace | None = None  # a traced request's trace (naiad.tracing)
        self.place = -1  # ordering: the request's place in arrival order
        self.state_slot: Any = None  # implicit state: the sequence slot whose state it updates
        self.client_outputs: frozenset[str] = frozenset()  # implicit state: what the client asked for
        # outputs asked for as classes or into a destination (None: all as produced)
        self.output_options: Mapping[str, RequestedOutput] | None = None
        # response cache: (key, lookup ns) of a request the cache did not hold, until its response is stored
        self.cache_key: tuple[bytes, int] | None = None

    @property
    def closed(self) -> bool:
        """True once the final flag was sent."""
        return self._closed

    def send(self, response: InferenceResponse | None = None, *, final: bool = False) -> None:
        """Send a response and/or the final flag."""
        if response is None and not final:
            raise NaiadError("a response is required unless the final flag is set", ErrorCode.INVALID_ARG)
        with self._lock:
            if self._closed:
                raise NaiadError("Response sender has been closed.", ErrorCode.INTERNAL)
            if final:
                self._closed = True
        event = ResponseEvent(response, final)
        trace = self.trace
        if trace is None:
            self._pipeline(self, event)
            return
        trace.responded(event)  # as the backend sent it, before any stage holds or reshapes it
        self._pipeline(self, event)
        if final:
            trace.final_sent()

    def is_cancelled(self) -> bool:
        """True when the client went away or cancelled the request."""
        return self.cancellation.cancelled


class _CallableSink:
    """A plain function used as a sink."""

    __slots__ = ("deliver",)

    def __init__(self, deliver: Callable[[ResponseEvent], None]) -> None:
        self.deliver = deliver


@dataclass(slots=True, eq=False)
class InferenceRequest:
    """One validated request for one model version.

    ``requested_outputs`` maps each output the backend must produce to how it was asked for;
    iterating it gives the names. A client that asked for no outputs gets every output of the
    config. ``batch_size`` is the request's leading dimension for batching models, else 1.
    ``lineage`` names the models whose requests caused this one, outermost first (empty for a
    client's request; ``("a", "b")`` for a request model ``b`` sent while serving one from ``a``).
    A backend reports when its computation started and ended with :meth:`report_compute`; the
    time before is counted as compute input, the time after as compute output. A backend of a model
    with ``sequence_batching { iterative_sequence: true }`` sets ``rescheduled`` during ``execute`` to
    have the request run again in its sequence, without its START flag, once this execution ends
    (Triton's request rescheduling); its response then comes from a later execution. A backend of a
    model that is not decoupled sets ``answered_later`` during ``execute`` for a request it answers
    after ``execute`` returns (from a thread of its own, as Triton's python backend lets a model
    do); any other request still open then is failed, as it would wait forever.
    """

    model_name: str
    model_version: int
    inputs: dict[str, Tensor]
    requested_outputs: dict[str, RequestedOutput]
    sender: ResponseSender
    id: str = ""
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0
    batch_size: int = 1
    arrival_ns: int = field(default_factory=time.monotonic_ns)
    compute_start_ns: int = 0
    compute_end_ns: int = 0
    lineage: tuple[str, ...] = ()
    rescheduled: bool = False
    answered_later: bool = False

    @property
    def cancellation(self) -> CancellationToken:
        """The token shared with the sender; add a callback to hear of cancellation at once."""
        return self.sender.cancellation

    @property
    def cancelled(self) -> bool:
        return self.sender.cancellation.cancelled

    def cancel(self) -> None:
        """Cancel the request; schedulers drop it, running backends may notice."""
        self.sender.cancellation.cancel()

    def is_cancelled(self) -> bool:
        return self.sender.cancellation.cancelled

    def report_compute(self, start_ns: int, end_ns: int) -> None:
        """When the backend's computation for this request started and ended (``time.monotonic_ns``)."""
        self.compute_start_ns = start_ns
        self.compute_end_ns = end_ns


def report_compute(requests: Sequence[InferenceRequest], start_ns: int, end_ns: int) -> None:
    """:meth:`InferenceRequest.report_compute` for every request of a batch."""
    for request in requests:
        request.compute_start_ns = start_ns
        request.compute_end_ns = end_ns


def error_response(error: NaiadError) -> InferenceResponse:
    """A response carrying only an error."""
    return InferenceResponse(error=error)
