"""What handing one inference request to another process and back costs: a prototype for frontend workers.

A frontend process (one that would parse HTTP/gRPC) hands each request to the process that owns the
models and gets the response back, as vLLM's API-server processes do with its engine core. The
control messages travel over a Unix socket pair: a 24-byte header and 72 bytes of metadata per
tensor (name, datatype, offset, size, shape). Two ways to carry the tensor bytes are compared:

* ``shm``: the metadata points into preallocated shared-memory arenas, one per direction, one slot
  per request in flight (``multiprocessing.shared_memory``). The frontend copies the request's
  tensors into its slot of the request arena; the model process reads them as numpy views
  (``np.frombuffer``, no copy), checks every offset against the arena, runs the model and copies
  the outputs into the same slot of the response arena, which the frontend reads as views;
* ``inline``: the tensor bytes follow the metadata through the socket (copied into and out of the
  kernel, both ways). The reference.

A third path, ``in-process``, calls the same model with no hand-off: the difference is what the
hand-off adds. The model is Triton's add_sub (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1)
on a small request (two FP32[16] in, two out) and a 4 MiB one (two FP32[524288] in, 4 MiB out).

For each path and size: the round trip's latency at concurrency 1 (p50, p99, over the requests of
every round) and its CPU time per request; then requests per second and CPU time per request with
32 requests in flight, where each side sends whatever it has ready in one ``sendmsg`` and answers
every message that one read brought. CPU time is summed over both processes (``getrusage``). Each
round measures every path in turn; throughput and CPU are the median over the rounds.

    python benchmarks/handoff.py [--repeats 3] [--seconds 0.8]

Segments are named ``naiad-handoff-<128 random bits>`` with mode 0600 and unlinked as soon as the
model process has mapped them; until then the resource tracker removes them if the frontend dies.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import os
import platform
import resource
import secrets
import selectors
import socket
import statistics
import struct
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Protocol

import numpy as np
from harness import print_table

FRAME = struct.Struct("<IHHIIQ")
"""Frame header: length (header included), kind, tensor count, slot, reserved, request id or value."""
TENSOR = struct.Struct("<16s4sIQQ4q")
"""Tensor metadata: name, datatype, rank, offset, size in bytes, shape (up to four dimensions)."""
REQUEST, RESPONSE, READY, REPORT, STOP = range(1, 6)
DTYPES = {b"FP32": np.dtype(np.float32)}
ALIGN = 64
WINDOW = 32
SIZES = {"FP32[16] x2": 16, "4 MiB": 512 * 1024}
"""Elements per tensor: two FP32[16] (128 bytes), or two FP32[524288] (4 MiB) each way."""
TensorList = list[tuple[bytes, np.ndarray]]


def aligned(size: int) -> int:
    """``size`` rounded up to a multiple of ALIGN."""
    return -(-size // ALIGN) * ALIGN


def cpu_us() -> float:
    """CPU time (user + system) this process has used, in microseconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1e6


def add_sub(inputs: TensorList) -> TensorList:
    """The model: Triton's add_sub example."""
    (_, a), (_, b) = inputs
    return [(b"OUTPUT0", a + b), (b"OUTPUT1", a - b)]


def header(kind: int, length: int = FRAME.size, count: int = 0, slot: int = 0, value: int = 0) -> bytes:
    """A frame header."""
    return FRAME.pack(length, kind, count, slot, 0, value)


def describe(name: bytes, array: np.ndarray, offset: int) -> bytes:
    """The metadata of one tensor whose bytes start at ``offset`` of their region."""
    dims = (*array.shape, 0, 0, 0, 0)[:4]
    return TENSOR.pack(name, b"FP32", array.ndim, offset, array.nbytes, *dims)


def as_bytes(array: np.ndarray) -> memoryview:
    """A byte view of a contiguous array, no copy."""
    return array.data.cast("B")


def mapped(segment: SharedMemory) -> memoryview:
    """The bytes of a mapped shared-memory segment."""
    if segment.buf is None:
        raise ValueError(f"segment {segment.name} is closed")
    return segment.buf


def view(region: memoryview, metadata: tuple[bytes, bytes, int, int, int, int, int, int, int]) -> np.ndarray:
    """The tensor ``metadata`` describes, as a view of ``region`` after checking that it lies inside."""
    _, dtype_name, rank, offset, nbytes, *dims = metadata
    dtype = DTYPES[dtype_name]
    # offset and nbytes are unsigned: one comparison bounds the tensor.
    if rank > 4 or offset + nbytes > len(region) or nbytes % dtype.itemsize:
        raise ValueError(f"tensor at {offset} (+{nbytes} bytes) is outside its {len(region)}-byte region")
    array = np.frombuffer(region, dtype, nbytes // dtype.itemsize, offset)
    if rank == 1 and dims[0] == array.size:
        return array
    return array.reshape(dims[:rank])  # raises unless the shape holds exactly these elements


def read_tensors(frame: memoryview, region: memoryview) -> TensorList:
    """The tensors a frame describes, as views of ``region`` (the frame itself, or an arena)."""
    count = FRAME.unpack_from(frame)[2]
    if FRAME.size + count * TENSOR.size > len(frame):
        raise ValueError("frame shorter than its tensor metadata")
    tensors = []
    for index in range(count):
        metadata = TENSOR.unpack_from(frame, FRAME.size + index * TENSOR.size)
        tensors.append((metadata[0].rstrip(b"\0"), view(region, metadata)))
    return tensors


class Channel:
    """One end of a non-blocking Unix stream socket carrying length-prefixed frames both ways."""

    def __init__(self, sock: socket.socket, capacity: int) -> None:
        sock.setblocking(False)
        self._socket = sock
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)
        self._events = selectors.EVENT_READ
        self._pending: deque[memoryview] = deque()
        self._buffer = bytearray(capacity)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0

    def send(self, *parts: bytes | memoryview) -> None:
        """Queue the parts of one frame; :meth:`flush` writes them."""
        self._pending.extend(memoryview(part) for part in parts)

    def flush(self) -> None:
        """Write queued bytes until done or until the socket's buffer is full."""
        while self._pending:
            try:
                sent = self._socket.sendmsg(list(itertools.islice(self._pending, 512)))
            except BlockingIOError:
                return
            self._consume(sent)

    def _consume(self, sent: int) -> None:
        while sent:
            first = self._pending[0]
            if len(first) > sent:
                self._pending[0] = first[sent:]
                return
            sent -= len(first)
            self._pending.popleft()

    def wait(self) -> bool:
        """Block until bytes arrive, writing queued ones meanwhile; False once the peer has closed."""
        while True:
            self._watch(selectors.EVENT_READ | (selectors.EVENT_WRITE if self._pending else 0))
            for _key, mask in self._selector.select():
                if mask & selectors.EVENT_WRITE:
                    self.flush()
                if mask & selectors.EVENT_READ:
                    return self._receive()

    def _watch(self, events: int) -> None:
        if events != self._events:
            self._selector.modify(self._socket, events)
            self._events = events

    def _receive(self) -> bool:
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start:
            left = self._end - self._start
            self._view[:left] = self._view[self._start : self._end]
            self._start, self._end = 0, left
        if self._end == len(self._buffer):
            raise ValueError("a frame is larger than the receive buffer")
        try:
            received = self._socket.recv_into(self._view[self._end :])
        except BlockingIOError:
            return True
        self._end += received
        return received > 0

    def frames(self) -> Iterator[memoryview]:
        """The complete frames received so far, each valid until the next :meth:`wait`."""
        while self._end - self._start >= FRAME.size:
            length = FRAME.unpack_from(self._buffer, self._start)[0]
            if length < FRAME.size:
                raise ValueError(f"bad frame length {length}")
            if self._end - self._start < length:
                return
            frame = self._view[self._start : self._start + length]
            self._start += length
            yield frame

    def close(self) -> None:
        """Close the selector and the socket."""
        self._selector.close()
        self._socket.close()


class Transport(Protocol):
    """How tensors travel with their frames."""

    def send(self, channel: Channel, kind: int, request_id: int, slot: int, tensors: TensorList) -> None:
        """Queue one request or response on ``channel``."""

    def receive(self, frame: memoryview) -> tuple[int, int, TensorList]:
        """The request id, slot and tensors (as views) of one received frame."""


class InlineTransport:
    """Tensor bytes follow their metadata through the socket."""

    def send(self, channel: Channel, kind: int, request_id: int, slot: int, tensors: TensorList) -> None:
        """Queue the header, the metadata and the tensors' bytes (no copy until the kernel's)."""
        offset = FRAME.size + len(tensors) * TENSOR.size
        metadata = []
        for name, array in tensors:
            metadata.append(describe(name, array, offset))
            offset += array.nbytes
        head = header(kind, offset, len(tensors), slot, request_id)
        channel.send(head + b"".join(metadata), *(as_bytes(array) for _, array in tensors))

    def receive(self, frame: memoryview) -> tuple[int, int, TensorList]:
        """Views of the tensors inside the frame."""
        _, _, _, slot, _, request_id = FRAME.unpack_from(frame)
        return request_id, slot, read_tensors(frame, frame)


class SharedMemoryTransport:
    """Tensor bytes go into a slot of a shared-memory arena; the frame says where."""

    def __init__(self, outgoing: memoryview, incoming: memoryview, slot_bytes: int) -> None:
        self._outgoing = outgoing
        self._incoming = incoming
        self._slot_bytes = slot_bytes

    def send(self, channel: Channel, kind: int, request_id: int, slot: int, tensors: TensorList) -> None:
        """Copy the tensors into ``slot`` of the outgoing arena and queue their metadata."""
        if not 0 <= slot < len(self._outgoing) // self._slot_bytes:
            raise ValueError(f"slot {slot} is outside the arena")
        offset = slot * self._slot_bytes
        metadata = []
        for name, array in tensors:
            self._outgoing[offset : offset + array.nbytes] = as_bytes(array)
            metadata.append(describe(name, array, offset))
            offset += aligned(array.nbytes)
        length = FRAME.size + len(tensors) * TENSOR.size
        channel.send(header(kind, length, len(tensors), slot, request_id) + b"".join(metadata))

    def receive(self, frame: memoryview) -> tuple[int, int, TensorList]:
        """Views of the tensors in the incoming arena."""
        _, _, _, slot, _, request_id = FRAME.unpack_from(frame)
        return request_id, slot, read_tensors(frame, self._incoming)


def serve(channel: Channel, transport: Transport) -> None:
    """The model process's loop: answer requests with add_sub and reports with its CPU time."""
    while channel.wait():
        for frame in channel.frames():
            kind = FRAME.unpack_from(frame)[1]
            if kind == STOP:
                return
            if kind == REPORT:
                channel.send(header(REPORT, value=round(cpu_us())))
                continue
            request_id, slot, inputs = transport.receive(frame)
            transport.send(channel, RESPONSE, request_id, slot, add_sub(inputs))
        channel.flush()


def model_process(sock: socket.socket, arena_names: Sequence[str], slot_bytes: int, capacity: int) -> None:
    """Entry point of the model process: map the arenas (if any), say ready, serve."""
    arenas = [SharedMemory(name=name) for name in arena_names]
    channel = Channel(sock, capacity)
    transport: Transport = InlineTransport()
    if arenas:
        requests, responses = arenas
        transport = SharedMemoryTransport(mapped(responses), mapped(requests), slot_bytes)
    try:
        channel.send(header(READY))
        channel.flush()
        serve(channel, transport)
    finally:
        channel.close()
        for arena in arenas:
            with contextlib.suppress(BufferError):
                arena.close()


@contextlib.contextmanager
def arena(size: int) -> Iterator[SharedMemory]:
    """A new shared-memory segment (mode 0600, unguessable name), unlinked and closed on every exit."""
    segment = SharedMemory(name=f"naiad-handoff-{secrets.token_hex(16)}", create=True, size=size)
    try:
        yield segment
    finally:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
        with contextlib.suppress(BufferError):
            segment.close()


@dataclass(frozen=True)
class Phase:
    """One measurement: every round trip's latency, wall time, CPU time of both processes and of the model's."""

    latencies_ns: list[int]
    seconds: float
    cpu_us: float
    model_cpu_us: float

    @property
    def per_second(self) -> float:
        """Requests per second."""
        return len(self.latencies_ns) / self.seconds

    @property
    def cpu_per_request_us(self) -> float:
        """CPU microseconds per request, both processes together."""
        return self.cpu_us / len(self.latencies_ns)

    @property
    def model_cpu_per_request_us(self) -> float:
        """CPU microseconds per request in the process that runs the model."""
        return self.model_cpu_us / len(self.latencies_ns)


def make_inputs(elements: int) -> TensorList:
    """add_sub's two inputs, as numpy arrays like those decoded from a request body."""
    rng = np.random.default_rng(0)
    return [(name, rng.random(elements, dtype=np.float32)) for name in (b"INPUT0", b"INPUT1")]


class Frontend:
    """The frontend's side of one model process: sends requests, keeps up to ``window`` in flight."""

    def __init__(self, channel: Channel, transport: Transport, inputs: TensorList) -> None:
        self._channel = channel
        self._transport = transport
        self._inputs = inputs

    def _next_frame(self) -> memoryview:
        while True:
            for frame in self._channel.frames():
                return frame
            self._channel.flush()
            if not self._channel.wait():
                raise ConnectionError("the model process went away")

    def wait_ready(self) -> None:
        """Wait for the model process's READY frame."""
        if FRAME.unpack_from(self._next_frame())[1] != READY:
            raise RuntimeError("the model process did not start")

    def cpu_times_us(self) -> tuple[float, float]:
        """CPU time of this process and of the model process (asked with a REPORT frame)."""
        self._channel.send(header(REPORT))
        reply = FRAME.unpack_from(self._next_frame())
        if reply[1] != REPORT:
            raise RuntimeError("expected a REPORT frame")
        return cpu_us(), reply[5]

    def check(self) -> None:
        """One request, its response compared with add_sub's."""
        self._transport.send(self._channel, REQUEST, 0, 0, self._inputs)
        _, _, outputs = self._transport.receive(self._next_frame())
        for (name, got), (_, want) in zip(outputs, add_sub(self._inputs), strict=True):
            if not np.array_equal(got, want):
                raise AssertionError(f"wrong {name.decode()}")

    def run(self, window: int, seconds: float) -> Phase:
        """Keep ``window`` requests in flight for ``seconds``, then wait for the last responses."""
        free = list(range(window))
        started = [0] * window
        latencies: list[int] = []
        frontend_before, model_before = self.cpu_times_us()
        begin = time.perf_counter_ns()
        deadline = begin + int(seconds * 1e9)
        request_id = 0
        while True:
            now = time.perf_counter_ns()
            while free and now < deadline:
                slot = free.pop()
                started[slot] = now
                self._transport.send(self._channel, REQUEST, request_id, slot, self._inputs)
                request_id += 1
            self._channel.flush()
            if len(free) == window:
                break
            if not self._channel.wait():
                raise ConnectionError("the model process went away")
            for frame in self._channel.frames():
                _, slot, _ = self._transport.receive(frame)
                latencies.append(time.perf_counter_ns() - started[slot])
                free.append(slot)
        elapsed = (time.perf_counter_ns() - begin) / 1e9
        frontend_after, model_after = self.cpu_times_us()
        model = model_after - model_before
        return Phase(latencies, elapsed, frontend_after - frontend_before + model, model)


def stop(channel: Channel, process: BaseProcess) -> None:
    """Ask the model process to exit; kill it if it does not within 10 s."""
    with contextlib.suppress(OSError):
        channel.send(header(STOP))
        channel.flush()
    process.join(10)
    if process.is_alive():
        process.kill()
        process.join()
    channel.close()


@contextlib.contextmanager
def start_model_process(transport: str, elements: int) -> Iterator[Frontend]:
    """A model process for one transport and size, and the frontend connected to it."""
    inputs = make_inputs(elements)
    slot_bytes = sum(aligned(array.nbytes) for _, array in inputs)
    inline_bytes = slot_bytes if transport == "inline" else 0
    capacity = max(1 << 20, 2 * (FRAME.size + len(inputs) * TENSOR.size + inline_bytes))
    with contextlib.ExitStack() as stack:
        arenas = []
        if transport == "shm":
            arenas = [stack.enter_context(arena(WINDOW * slot_bytes)) for _ in range(2)]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        arguments = (theirs, [segment.name for segment in arenas], slot_bytes, capacity)
        process = multiprocessing.get_context("spawn").Process(target=model_process, args=arguments, daemon=True)
        process.start()
        theirs.close()
        channel = Channel(ours, capacity)
        stack.callback(stop, channel, process)
        frontend_transport: Transport = InlineTransport()
        if arenas:
            requests, responses = arenas
            frontend_transport = SharedMemoryTransport(mapped(requests), mapped(responses), slot_bytes)
        frontend = Frontend(channel, frontend_transport, inputs)
        frontend.wait_ready()
        for segment in arenas:
            segment.unlink()
        frontend.check()
        yield frontend


def in_process(elements: int, seconds: float) -> Phase:
    """The model called directly, one request after another: the cost without a hand-off."""
    inputs = make_inputs(elements)
    latencies: list[int] = []
    cpu_before = cpu_us()
    begin = time.perf_counter_ns()
    deadline = begin + int(seconds * 1e9)
    now = begin
    while now < deadline:
        add_sub(inputs)
        end = time.perf_counter_ns()
        latencies.append(end - now)
        now = end
    spent = cpu_us() - cpu_before
    return Phase(latencies, (now - begin) / 1e9, spent, spent)


def percentile_us(latencies_ns: Sequence[int], fraction: float) -> float:
    """A percentile (nearest rank) of latencies, in microseconds."""
    ordered = sorted(latencies_ns)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000


@dataclass(frozen=True)
class Result:
    """One path and size: latency and CPU at concurrency 1; throughput and CPU with WINDOW in flight."""

    p50_us: float
    p99_us: float
    cpu_single_us: float
    per_second: float
    cpu_many_us: float
    model_cpu_many_us: float


def summarize(single: Sequence[Phase], many: Sequence[Phase]) -> Result:
    """Latency percentiles over every round's requests, and medians over rounds of the rest."""
    latencies = [latency for phase in single for latency in phase.latencies_ns]
    return Result(
        percentile_us(latencies, 0.50),
        percentile_us(latencies, 0.99),
        statistics.median(phase.cpu_per_request_us for phase in single),
        statistics.median(phase.per_second for phase in many),
        statistics.median(phase.cpu_per_request_us for phase in many),
        statistics.median(phase.model_cpu_per_request_us for phase in many),
    )


PATHS = ("in-process", "shm", "inline")
Phases = dict[tuple[str, str], tuple[list[Phase], list[Phase]]]
"""(payload, path) -> the phases at concurrency 1 and at WINDOW."""


def measure_round(frontends: dict[tuple[str, str], Frontend], phases: Phases, seconds: float) -> None:
    """One round: every size and path in turn, at concurrency 1 and then WINDOW."""
    for size, elements in SIZES.items():
        single, many = phases[size, "in-process"]
        single.append(in_process(elements, seconds))
        many.append(single[-1])
        for path in PATHS[1:]:
            single, many = phases[size, path]
            single.append(frontends[size, path].run(1, seconds))
            many.append(frontends[size, path].run(WINDOW, seconds))


def measure_all(repeats: int, seconds: float) -> dict[tuple[str, str], Result]:
    """Start a model process per size and path, warm them up, measure ``repeats`` rounds."""
    phases: Phases = {(size, path): ([], []) for size in SIZES for path in PATHS}
    with contextlib.ExitStack() as stack:
        frontends = {
            (size, path): stack.enter_context(start_model_process(path, elements))
            for size, elements in SIZES.items()
            for path in PATHS[1:]
        }
        for frontend in frontends.values():
            frontend.run(WINDOW, seconds / 4)  # warm-up, which also faults in the arenas' pages
        for _ in range(repeats):
            measure_round(frontends, phases, seconds)
    return {key: summarize(single, many) for key, (single, many) in phases.items()}


def report(results: dict[tuple[str, str], Result]) -> None:
    """The results as a table, with the CPU time the hand-off adds to the in-process call."""
    rows = []
    for (size, path), result in results.items():
        base = results[size, "in-process"]
        rows.append(
            [
                size,
                path,
                f"{result.p50_us:.1f}",
                f"{result.p99_us:.1f}",
                f"{result.cpu_single_us:.1f}",
                f"{result.per_second:,.0f}",
                f"{result.cpu_many_us:.1f}",
                f"{result.model_cpu_many_us:.1f}",
                f"{result.cpu_many_us - base.cpu_many_us:.1f}",
            ]
        )
    header_row = [
        "payload",
        "path",
        "c=1 p50 us",
        "c=1 p99 us",
        "c=1 CPU us/req",
        f"c={WINDOW} req/s",
        f"c={WINDOW} CPU us/req",
        "of which model proc",
        "added by hand-off",
    ]
    print_table(
        "Request hand-off between two processes (CPU: both processes; added: minus in-process)", header_row, rows
    )


def main() -> None:
    """Parse the options, measure, print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over every path (default 3)")
    parser.add_argument("--seconds", type=float, default=0.8, help="length of each measurement (default 0.8)")
    options = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}")
    report(measure_all(options.repeats, options.seconds))


if __name__ == "__main__":
    main()
