"""Request traces in Triton's format (trace extension, ``triton`` mode).

The :class:`Tracer` decides at admission whether a request is traced (every ``trace_rate``-th
request of its model, while ``trace_count`` lasts; a request another model makes while serving a
traced one is traced too, with its ``parent_id``). A traced request's sender carries its
:class:`RequestTrace`, which gathers Triton's timestamps (``time.monotonic_ns``, as Triton's
steady clock): ``REQUEST_START``, ``QUEUE_START``, ``COMPUTE_START``, ``COMPUTE_INPUT_END``,
``COMPUTE_OUTPUT_START``, ``COMPUTE_END`` (not for an ensemble, which no backend computes),
``INFER_RESPONSE_COMPLETE`` at the first response of a request from a frontend (as the model's
pipeline releases it to the frontend, after any stage that held it; BLS and ensemble-step requests
get none, as in Triton) and
``REQUEST_END`` (once the final response is sent and the execution over); at level ``TENSORS``
the request's inputs and each response's outputs too. A request from a frontend also gets the
frontend's own moments through its :class:`FrontendTiming`: reading the request
(``HTTP_RECV_START``/``HTTP_RECV_END``, ``GRPC_WAITREAD_START``/``GRPC_WAITREAD_END``) and writing
each response (``HTTP_SEND_START``/``HTTP_SEND_END``, ``GRPC_SEND_START``/``GRPC_SEND_END``); its
trace is complete once the request is released and the frontend has written its last response.
Traces are kept per generation of settings (Triton's ``TraceSetting``: a change of settings starts
a new one): with ``log_frequency`` N they go to ``trace_file.0``, ``trace_file.1``, ... every N traces;
when a ``trace_count`` is spent, its generation's traces go to the next ``trace_file.<n>`` at once;
what is left when a generation ends (its settings changed, the server stopping) goes to the next
numbered file with ``log_frequency``, else to ``trace_file`` itself, one JSON array written when the
server stops.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.errors import NaiadError
from naiad.trace_settings import Change, TraceSettings, check_settings

if TYPE_CHECKING:
    from naiad.inference import InferenceRequest, ResponseEvent
    from naiad.tensor import Tensor

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Generation:
    """The traces of one generation of one owner's settings (Triton's ``TraceSetting``)."""

    log_frequency: int
    seen: int = 0  # requests counted by the sampling
    begun: int = 0  # traces begun (a request made for a traced one counts with it)
    collected: int = 0
    count_spent: bool = False
    ended: bool = False  # its settings changed: flushed once its traces are all in
    entries: list[dict[str, Any]] = field(default_factory=list)
    pending: int = 0  # traces in ``entries``


class Tracer:
    """The server's trace settings, its sampling, and the traces collected but not yet written."""

    def __init__(self, settings: TraceSettings) -> None:
        self._startup = settings
        self._global = settings
        self._overrides: dict[str, dict[str, Any]] = {}  # model -> its own settings
        self._generations: dict[str, _Generation] = {}  # settings owner ("" the server) -> its current one
        self._lock = threading.Lock()
        self._next_id = 0
        self._main: list[dict[str, Any]] = []  # entries for ``trace_file`` itself, written at the end
        self._files_written = 0
        self._warned = False
        self.active = bool(settings.level)  # read without the lock on every request

    def settings(self, model: str = "") -> TraceSettings:
        """The settings that apply to ``model`` ("" the server's)."""
        with self._lock:
            return self._effective(model)

    def update(self, model: str, change: Change) -> TraceSettings:
        """Apply a checked change (see :mod:`naiad.trace_settings`) to ``model``'s settings ("" the
        server's); returns the settings that now apply. Settings Triton would refuse (tracing on
        without a rate or a file) are refused and nothing changes. Sampling starts over, as in Triton:
        with ``trace_rate`` N, the N-th request after an update is the first traced."""
        with self._lock:
            if model:
                overrides = dict(self._overrides.get(model, {}))
                for field, value in change.items():
                    if value is None:
                        overrides.pop(field, None)
                    else:
                        overrides[field] = value
                effective = replace(self._global, **overrides)
                check_settings(effective)
                if overrides:
                    self._overrides[model] = overrides
                else:  # back to the server's settings, its sampling included
                    self._overrides.pop(model, None)
                self._end(model)  # as in Triton, sampling starts over with new settings
            else:
                fields = {
                    field: getattr(self._startup, field) if value is None else value for field, value in change.items()
                }
                effective = replace(self._global, **fields)
                check_settings(effective)
                self._global = effective
                for owner in list(self._generations):  # every model's settings start over too
                    self._end(owner)
            self.active = bool(self._global.level) or any(
                overrides.get("level") for overrides in self._overrides.values()
            )
            return effective

    def sample(
        self, request: InferenceRequest, parent: InferenceRequest | None, frontend: FrontendTiming | None = None
    ) -> RequestTrace | None:
        """The trace of ``request`` if it is to be traced (``frontend``: the timing of the frontend
        that read it, which then reports its writes to the trace)."""
        parent_trace = parent.sender.trace if parent is not None else None
        if parent is not None and parent_trace is None:
            return None  # as in Triton, a request made for another (BLS, an ensemble's step) is traced with it only
        with self._lock:
            if parent_trace is not None:
                settings, generation = parent_trace.settings, parent_trace.generation
            else:
                owner = request.model_name if request.model_name in self._overrides else ""
                settings = self._effective(request.model_name)
                if not settings.level or settings.count == 0:
                    return None
                if owner not in self._generations:
                    self._generations[owner] = _Generation(settings.log_frequency)
                generation = self._generations[owner]
                generation.seen += 1
                if generation.seen % settings.rate:
                    return None
                if settings.count > 0:
                    generation.count_spent = self._spend(owner) == 0
                generation.begun += 1
            self._next_id += 1
            trace_id = self._next_id
        parent_id = parent_trace.id if parent_trace is not None else None
        return RequestTrace(self, trace_id, request, settings, generation, parent_id, frontend)

    def collect(self, trace: RequestTrace) -> None:
        """Keep a finished trace; write its generation's traces to the next numbered file when its
        ``trace_count`` is spent and every trace is in, or ``log_frequency`` traces are in."""
        with self._lock:
            generation = trace.generation
            generation.entries += trace.entries()
            if trace.parent_id is not None:  # counted with its parent's, as Triton writes them together
                return
            generation.pending += 1
            generation.collected += 1
            spent = generation.count_spent and generation.collected == generation.seen
            if spent or (generation.log_frequency and generation.pending >= generation.log_frequency):
                self._write_numbered(generation)
            elif generation.ended and generation.collected == generation.begun:
                self._flush(generation)

    def close(self) -> None:
        """Write what is collected and not yet written (the server is stopping)."""
        with self._lock:
            for generation in self._generations.values():
                self._flush(generation)
            self._generations.clear()
            if self._main:
                entries, self._main = self._main, []
                self._write(self._global.file, entries)

    def _end(self, owner: str) -> None:
        """``owner``'s settings changed: its current generation ends, flushed once its traces are in."""
        generation = self._generations.pop(owner, None)
        if generation is None:
            return
        generation.ended = True
        if generation.collected == generation.begun:
            self._flush(generation)

    def _flush(self, generation: _Generation) -> None:
        """What is left of an ending generation: to the next numbered file with ``log_frequency``, else
        to ``trace_file`` itself."""
        if not generation.pending:
            return
        if generation.log_frequency:
            self._write_numbered(generation)
        else:
            self._main += generation.entries
            generation.entries, generation.pending = [], 0

    def _write_numbered(self, generation: _Generation) -> None:
        entries, generation.entries, generation.pending = generation.entries, [], 0
        self._write(f"{self._global.file}.{self._files_written}", entries)
        self._files_written += 1

    def _effective(self, model: str) -> TraceSettings:
        overrides = self._overrides.get(model)
        return replace(self._global, **overrides) if overrides else self._global

    def _spend(self, owner: str) -> int:
        """One trace of ``trace_count`` is used, from the settings that hold the count; returns what is left."""
        if owner and "count" in self._overrides[owner]:
            self._overrides[owner]["count"] -= 1
            return int(self._overrides[owner]["count"])
        self._global = replace(self._global, count=self._global.count - 1)
        return self._global.count

    def _write(self, path: str, entries: list[dict[str, Any]]) -> None:
        if not self._global.file:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "tracing is on but no trace file is set: traces are dropped; "
                    "start naiad with --trace-config triton,file=PATH to keep them"
                )
            return
        try:
            with open(path, "w", encoding="utf-8") as file:
                json.dump(entries, file, separators=(",", ":"))  # compact, as Triton writes it
        except OSError as error:
            logger.error(
                "cannot write %d trace entries to '%s': %s; check --trace-config file", len(entries), path, error
            )


_FRONTEND_NAMES = {
    "HTTP": ("HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"),
    "GRPC": ("GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"),
}


class FrontendTiming:
    """A frontend's own moments of one request, for its trace: when it began and finished reading
    the request, and each response it writes.

    A frontend makes one (:meth:`start`) only while tracing is on, gives it to the submission, calls
    :meth:`sending` / :meth:`sent` around each write and :meth:`done` once it writes no more (on every
    path: a trace stays open until then). Nothing is recorded when the request is not traced.
    """

    __slots__ = ("protocol", "read_end", "read_start", "trace")

    def __init__(self, protocol: str, read_start: int) -> None:
        self.protocol = protocol
        self.read_start = read_start
        self.read_end = read_start
        self.trace: RequestTrace | None = None

    @classmethod
    def start(cls, tracer: Tracer, protocol: str, read_start: int | None = None) -> FrontendTiming | None:
        """A timing for a request of ``protocol`` ("HTTP" or "GRPC") whose reading began at
        ``read_start`` (now when None), or None while nothing is traced."""
        if not tracer.active:
            return None
        return cls(protocol, time.monotonic_ns() if read_start is None else read_start)

    def received(self) -> None:
        """The request is read."""
        self.read_end = time.monotonic_ns()

    def sending(self) -> int:
        """A write begins: its start, for :meth:`sent`."""
        return time.monotonic_ns()

    def sent(self, start: int) -> None:
        """A write that began at ``start`` is done."""
        if self.trace is not None:
            self.trace.frontend_sent(start, time.monotonic_ns())

    def done(self) -> None:
        """The frontend writes nothing more for this request."""
        if self.trace is not None:
            self.trace.frontend_done()


class RequestTrace:
    """What one traced request gathers; thread-safe (responses and executions may come from any thread)."""

    __slots__ = (
        "_ended",
        "_final",
        "_frontend_open",
        "_info",
        "_lock",
        "_released",
        "_responded",
        "_send_names",
        "_started",
        "_tracer",
        "events",
        "generation",
        "id",
        "parent_id",
        "settings",
        "tensors",
        "timestamps",
    )

    def __init__(
        self,
        tracer: Tracer,
        trace_id: int,
        request: InferenceRequest,
        settings: TraceSettings,
        generation: _Generation,
        parent_id: int | None,
        frontend: FrontendTiming | None = None,
    ) -> None:
        self._tracer = tracer
        self.id = trace_id
        self.settings = settings
        self.generation = generation
        self.parent_id = parent_id
        self.timestamps = "TIMESTAMPS" in settings.level
        self.tensors = "TENSORS" in settings.level
        self._info: dict[str, Any] = {
            "id": trace_id,
            "model_name": request.model_name,
            "model_version": request.model_version,
        }
        if request.id:  # Triton leaves it out when the request has none
            self._info["request_id"] = request.id
        if parent_id is not None:
            self._info["parent_id"] = parent_id
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._started = self._ended = self._final = self._released = self._responded = False
        self._frontend_open = frontend is not None
        self._send_names = ("", "")
        if frontend is not None:
            frontend.trace = self
            read_start, read_end, *send = _FRONTEND_NAMES[frontend.protocol]
            self._send_names = (send[0], send[1])
            self._stamp(read_start, frontend.read_start)
            self._stamp(read_end, frontend.read_end)
        self._stamp("REQUEST_START", request.arrival_ns)
        self._stamp("QUEUE_START", time.monotonic_ns())
        if self.tensors:
            self._tensors("TENSOR_QUEUE_INPUT", request.inputs.values())

    def started(self) -> None:
        with self._lock:
            self._started = True

    def executed(self, compute: tuple[int, int, int, int] | None) -> None:
        """The execution ended; ``compute``: its start, input end, output start and end (None: nothing
        computed it, as for an ensemble, whose steps have traces of their own)."""
        if compute is not None:
            names = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
            for name, at in zip(names, compute, strict=True):
                self._stamp(name, at)
        with self._lock:
            self._ended = True
            done = self._final
        if done:
            self._release()

    def responded(self, event: ResponseEvent) -> None:
        """The backend sent a response (its tensors are traced as sent, before any stage changes them)."""
        response = event.response
        if response is not None and self.tensors and response.error is None:
            self._tensors("TENSOR_BACKEND_OUTPUT", response.outputs)

    def final_sent(self) -> None:
        """The final flag reached the frontend, or went into the model's pipeline and a stage holds it
        (Triton ends a held request's trace without waiting for its response); once."""
        with self._lock:
            if self._final:
                return
            self._final = True
            done = self._ended or not self._started
        if done:
            self._release()

    def released(self) -> None:
        """A response left the model's pipeline for the frontend (after any stage that held it, e.g.
        ``preserve_ordering``): Triton stamps ``INFER_RESPONSE_COMPLETE`` then, for the first response
        of a frontend's request only."""
        with self._lock:
            first, self._responded = not self._responded, True
        if first and self._send_names[0]:
            self._stamp("INFER_RESPONSE_COMPLETE", time.monotonic_ns())

    def frontend_sent(self, start: int, end: int) -> None:
        """The frontend wrote a response from ``start`` to ``end``."""
        send_start, send_end = self._send_names
        self._stamp(send_start, start)
        self._stamp(send_end, end)

    def frontend_done(self) -> None:
        """The frontend writes nothing more: the trace is complete if the request is released too."""
        with self._lock:
            if not self._frontend_open:
                return
            self._frontend_open = False
            complete = self._released
        if complete:
            self._tracer.collect(self)

    def _release(self) -> None:
        """The request is done with (its final response sent, its execution over): the trace is complete
        unless its frontend has responses still to write."""
        self._stamp("REQUEST_END", time.monotonic_ns())
        with self._lock:
            self._released = True
            complete = not self._frontend_open
        if complete:
            self._tracer.collect(self)

    def entries(self) -> list[dict[str, Any]]:
        """The trace as Triton writes it: the request's model and id (with timestamps on), then one
        entry per event."""
        return [self._info, *self.events] if self.timestamps else list(self.events)

    def _stamp(self, name: str, at: int) -> None:
        if self.timestamps:
            self.events.append({"id": self.id, "timestamps": [{"name": name, "ns": at}]})

    def _tensors(self, activity: str, tensors: Any) -> None:
        for tensor in tensors:
            self.events.append({"id": self.id, "activity": activity, "tensor": _tensor_json(tensor)})


def _tensor_json(tensor: Tensor) -> dict[str, str]:
    """A tensor as a trace shows it: its values, shape and datatype as comma-separated text."""
    try:
        values = np.asarray(tensor.numpy()).reshape(-1)
        if tensor.datatype == "BYTES":  # each element quoted, as Triton writes them
            data = ",".join(f'"{v.decode("utf-8", "replace") if isinstance(v, bytes) else v}"' for v in values)
        elif tensor.datatype in ("FP16", "BF16"):  # Triton writes no values for these
            data = ""
        elif values.dtype.kind == "f":
            data = ",".join(format(float(v), "g") for v in values)
        else:
            data = ",".join(str(int(v)) for v in values)
    except (NaiadError, TypeError, ValueError):  # on a device, or not readable as numbers
        data = ""
    return {"name": tensor.name, "data": data, "shape": ",".join(map(str, tensor.shape)), "dtype": tensor.datatype}


def trace_started(requests: Sequence[InferenceRequest]) -> None:
    """An execution of ``requests`` started: their traces wait for it to end."""
    for request in requests:
        trace = request.sender.trace
        if trace is not None:
            trace.started()


def trace_executed(requests: Sequence[InferenceRequest], start: int, end: int, *, stamped: bool = True) -> None:
    """An execution of ``requests`` from ``start`` to ``end`` ended; each reported compute phase splits it.
    ``stamped=False``: the traces get no compute timestamps (no backend computed: an ensemble)."""
    for request in requests:
        trace = request.sender.trace
        if trace is None:
            continue
        if not stamped:
            trace.executed(None)
            continue
        inside = start <= request.compute_start_ns <= request.compute_end_ns <= end
        trace.executed(
            (
                start,
                request.compute_start_ns if inside else start,
                request.compute_end_ns if inside else end,
                end,
            )
        )


def trace_path_writable(path: str) -> str | None:
    """Why ``path`` cannot take traces, or None."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"its folder '{folder}' does not exist"
    if not os.access(folder, os.W_OK):
        return f"its folder '{folder}' is not writable"
    return None
