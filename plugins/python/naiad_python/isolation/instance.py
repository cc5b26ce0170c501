"""The server side of an isolated python-model instance: a model instance whose work runs in a worker.

``execute`` writes the batch's inputs into its arena, sends the batch and waits until the worker's
``execute`` returned; the responses that ``execute`` returned (or sent on its thread) come with that
news and go out from the batch's own thread, as in the server process, so a client that has its
response finds the request in the statistics. ``execute`` is a coroutine on the server's event loop,
so no thread stands between the loop and the worker: for a model that is not decoupled that news comes
on the control socket, which the loop itself polls; a decoupled model's comes on the work socket after
the responses it sent, and the reader thread passes it on.
Responses sent at other times (decoupled models) go out from the reader thread, as they come. A
worker that dies (SIGKILL, a segfault, ``os._exit``) fails its requests in flight with an error naming
the model and the instance; the instance reports not ready and starts a new worker, waiting longer
each time one dies soon after starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial

from naiad.backend import (
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    Metric,
    MetricFamily,
    ModelInstance,
    NaiadError,
    describe_exit,
    report_compute,
)
from naiad_python import instance as in_process
from naiad_python import origin
from naiad_python.backend_model import PythonModel
from naiad_python.batch_refusal import batch_refusal, fail_requests
from naiad_python.isolation.arena import ReadArena, WriteArena
from naiad_python.isolation.bls_server import BlsRequests
from naiad_python.isolation.channel import Channel, ChannelClosed, Message
from naiad_python.isolation.log_forwarding import log_forwarded
from naiad_python.isolation.server_calls import ServerCalls
from naiad_python.isolation.spawn import LOAD_TIMEOUT_S, WorkerProcess, retire, spawn_worker

_log = logging.getLogger("naiad.python")

FINALIZE_TIMEOUT_S = 30.0
HANG_GRACE_S = 5.0
RESTARTS_FAMILY = "naiad_python_worker_restarts"
_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_STABLE_S = 30.0  # a worker that lived this long resets the backoff
_RESTART_WAIT_S = 5.0  # a batch waits for a restart due within this long, and this long for its load


class _Worker:
    """One worker process, its channel and its arenas."""

    def __init__(self, process: WorkerProcess, channel: Channel, control: Channel) -> None:
        self.process = process
        self.channel = channel  # batches, loads, finalize out; everything the worker says in
        self.control = control  # releases, cancellations, readiness checks out
        self.inputs = WriteArena()
        self.outputs = ReadArena()
        self.returned = ReadArena()  # a non-decoupled batch's responses, read on the event loop
        self.watched = False  # the event loop reads the control socket
        self.bls = BlsRequests(control)  # the BLS requests it made
        self.started = time.monotonic()
        self.killed_because = ""  # set when the server killed it on purpose

    def exit_reason(self) -> str:
        if self.killed_because:
            return self.killed_because
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        return f"it {describe_exit(code)}"

    def kill(self) -> None:
        retire((self.process, self.channel, self.control))
        self.inputs.close()
        self.bls.close()


class _Batch:
    """A batch running in the worker: its requests, and the worker's ``executed`` message once it came.

    Its compute phase, as Triton's python backend times it, runs from the batch's message leaving for
    the worker until the worker's ``executed`` message is back (the hops included).
    """

    __slots__ = ("executed", "executed_ns", "fds", "future", "requests", "sent_ns")

    def __init__(self, requests: Sequence[InferenceRequest], loop: asyncio.AbstractEventLoop) -> None:
        self.requests = requests
        self.future: asyncio.Future[None] = loop.create_future()  # done when it ended, or its worker died
        self.executed: Message | None = None
        self.sent_ns = 0  # monotonic ns
        self.executed_ns = 0
        self.fds: list[int] = []  # the new scratch arenas its responses are in, in order

    def arrived(self, message: Message, fds: list[int]) -> None:
        """The worker's ``executed`` message for this batch came."""
        self.executed_ns = time.monotonic_ns()
        self.executed, self.fds = message, fds

    def end(self) -> None:
        """Wake the ``execute`` waiting for the batch (on the loop)."""
        if not self.future.done():
            self.future.set_result(None)

    def end_from_thread(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.future.get_loop().call_soon_threadsafe(self.end)


class IsolatedInstance(ModelInstance):
    """A python-model instance served by a worker process (restarted when it dies)."""

    def __init__(self, model: PythonModel, context: InstanceContext) -> None:
        self.name = context.name
        self.model_name = context.model_name
        self._model = model
        self._context = context
        self._decoupled = context.config.model_transaction_policy.decoupled
        self._batching = context.config.max_batch_size > 0
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._serving = threading.Event()  # set while a worker serves (or the instance closes)
        self._pending: dict[int, InferenceRequest] = {}
        self._batches: dict[int, _Batch] = {}
        self._ready: dict[int, Future[bool]] = {}
        self._keys = itertools.count(1)
        self._closing = False
        self._failures = 0
        self._restart_due = 0.0  # when the restart under way starts its next worker (monotonic)
        self.restarts = 0
        self._calls = ServerCalls(context.model_name, context.name, context.server)
        self._restart_series = _restart_series(context)
        try:
            self._worker = self._start()
            self._serving.set()
        except BaseException:
            self._calls.close()
            raise

    # -- starting and losing workers -----------------------------------------------------------

    def _start(self) -> _Worker:
        """Start a worker and load the instance in it; raise the worker's error if loading fails."""
        process, channel, control = self._model.take_spare() or spawn_worker(self._model.interpreter)
        worker = _Worker(process, channel, control)
        context = self._context
        worker.channel.send(
            {
                "op": "load",
                "model_name": context.model_name,
                "version": context.version,
                "model_dir": str(context.model_dir),
                "model_file": str(self._model.model_file),
                "name": context.name,
                "kind": context.kind,
                "device_id": context.device_id,
                "config": context.config.SerializeToString(),
                "config_json": context.config_json,
                "group": context.group,
                "group_index": context.group_index,
                "index": context.index,
            }
        )
        channel.sock.settimeout(LOAD_TIMEOUT_S)
        try:
            reply = self._await_load(worker)
        except (ChannelClosed, TimeoutError):
            reason = worker.exit_reason()
            worker.kill()
            raise NaiadError(  # Triton's first sentence, for whoever searches the log for it
                f"Stub process '{self.name}' is not healthy. The worker process of python model "
                f"'{self.model_name}' failed while loading the model ({reason}); see the log above for its output",
                ErrorCode.INTERNAL,
            ) from None
        channel.sock.settimeout(None)
        if reply["op"] != "loaded":
            worker.kill()
            raise NaiadError(reply["message"], ErrorCode[reply["code"]])
        threading.Thread(target=self._read, args=(worker,), name=f"naiad-python-{self.name}", daemon=True).start()
        return worker

    def _await_load(self, worker: _Worker) -> Message:
        """The worker's answer to the load; what it logs and asks of the server meanwhile is handled."""
        while True:
            message, fds = worker.channel.receive()
            if message["op"] in ("loaded", "failed"):
                return message
            self._dispatch(worker, message, fds)

    def _read(self, worker: _Worker) -> None:
        """Dispatch the worker's messages until it goes away."""
        try:
            while True:
                message, fds = worker.channel.receive()
                self._dispatch(worker, message, fds)
                if message["op"] == "finalized":
                    return
        except ChannelClosed:
            pass
        except Exception:  # a bug here must not leave requests waiting forever
            _log.exception("python model '%s' instance '%s': reading its worker failed", self.model_name, self.name)
        self._lost(worker)

    def _dispatch(self, worker: _Worker, message: Message, fds: list[int]) -> None:
        op = message["op"]
        if op == "response":
            self._adopt(worker.outputs, message, fds)
            self._respond(worker.outputs, message)
            if "arena" in message:
                worker.control.send({"op": "released", "count": 1})
        elif op == "executed":  # a decoupled model's: it returned no responses
            worker.inputs.released()
            with self._lock:
                batch = self._batches.pop(message["batch"])
            batch.arrived(message, [])
            batch.end_from_thread()
        elif op == "call" and message["name"] == "submit":
            self._submit_bls(worker, message, fds)
        elif op == "call":
            self._calls.handle(message, worker.control.send)
        elif op == "bls_released":
            worker.bls.released()
        elif op == "bls_cancel":
            worker.bls.cancel(message["bls"])
        elif op == "log":
            log_forwarded(message, self.model_name, self._context.version)
        elif op == "ready":
            future = self._ready.pop(message["token"], None)
            if future is not None:
                future.set_result(bool(message["value"]))

    def _submit_bls(self, worker: _Worker, message: Message, fds: list[int]) -> None:
        """Queue a BLS request of the worker's, its inputs copied out of the worker's arena."""
        (request,) = message["args"]
        if fds:
            worker.outputs.adopt(request["arena"], fds.pop(0))
        inputs = worker.outputs.tensors(request["arena"], request["inputs"], copy=True)
        with contextlib.suppress(ChannelClosed):
            worker.control.send({"op": "released", "count": 1})
        with self._lock:
            batch = [self._pending[key] for key in request["parent"] if key in self._pending]
        parent = origin.parent_of(batch) if batch else None
        self._calls.answer(
            message, worker.control.send, lambda: worker.bls.submit(self._calls.server, request, inputs, parent)
        )

    @staticmethod
    def _adopt(arena: ReadArena, message: Message, fds: list[int]) -> None:
        """Map the arena a response's tensors are in, if it is new (``fds``: the new arenas, in order)."""
        if "arena" in message and message["arena"] != arena.arena_id:
            arena.adopt(message["arena"], fds.pop(0))

    def _respond(self, arena: ReadArena, message: Message) -> None:
        """Deliver one response of the worker's to its request (``arena`` mapped)."""
        outputs = []
        if "arena" in message:
            outputs = arena.tensors(message["arena"], message["outputs"], copy=True)
        error = None
        if "error" in message:
            text, code = message["error"]
            error = NaiadError(text, ErrorCode[code])
        response = None
        if "parameters" in message:
            response = InferenceResponse(outputs, error, message["parameters"], message.get("fails_request", True))
        with self._lock:
            request = self._pending.pop(message["key"]) if message["final"] else self._pending.get(message["key"])
        if request is not None and not request.sender.closed:
            request.sender.send(response, final=message["final"])

    def _lost(self, worker: _Worker) -> None:
        """The worker is gone: fail what it held, then start another unless the instance is closing."""
        with self._lock:
            if self._worker is not worker:
                return
            self._worker = None
            self._serving.clear()
            pending, self._pending = self._pending, {}
            batches, self._batches = self._batches, {}
            closing = self._closing
        if closing:
            worker.kill()
            return
        reason = worker.exit_reason()
        lived = time.monotonic() - worker.started
        worker.kill()
        _log.error(
            "python model '%s' instance '%s': its process died (%s); starting another",
            self.model_name,
            self.name,
            reason,
        )
        fail_requests(pending.values(), self._died(reason))
        for batch in batches.values():
            batch.end_from_thread()
        for future in list(self._ready.values()):
            future.set_result(False)
        self._ready.clear()
        self._failures = 0 if lived > _STABLE_S else self._failures + 1
        threading.Thread(target=self._restart, name=f"naiad-python-restart-{self.name}", daemon=True).start()

    def _died(self, reason: str) -> NaiadError:
        return NaiadError(  # Triton's first sentence, for whoever searches the log for it
            f"Stub process '{self.name}' is not healthy. The worker process of python model '{self.model_name}' "
            f"died while running the request ({reason}); the instance is restarting",
            ErrorCode.INTERNAL,
        )

    def _restart(self) -> None:
        attempt = 0
        while True:
            delay = _BACKOFF_S[min(self._failures + attempt, len(_BACKOFF_S) - 1)]
            self._restart_due = time.monotonic() + delay
            time.sleep(delay)
            with self._lock:
                if self._closing:
                    return
            try:
                worker = self._start()
            except NaiadError as error:
                _log.error("python model '%s' instance '%s' could not restart: %s", self.model_name, self.name, error)
                attempt += 1
                continue
            with self._lock:
                if self._closing:
                    worker.kill()
                    return
                self._worker = worker
                self._serving.set()
                self.restarts += 1
            if self._restart_series is not None:
                self._restart_series[1].increment()
            _log.warning("python model '%s' instance '%s' restarted its process", self.model_name, self.name)
            return

    def _restart_wait_s(self) -> float:
        """How long a batch waits for the restart under way: until it is due and then for the load, when
        it is due soon (a worker that keeps dying restarts ever later: its batches fail at once)."""
        due = self._restart_due - time.monotonic()
        return 0.0 if due > _RESTART_WAIT_S else max(due, 0.0) + _RESTART_WAIT_S

    # -- the instance interface ---------------------------------------------------------------

    async def execute(self, requests: Sequence[InferenceRequest]) -> None:
        """Run one batch in the worker; returns when the model's ``execute`` returned there."""
        refused = batch_refusal(requests, self._batching)
        if refused is not None:
            fail_requests(requests, refused)
            return
        with self._lock:
            worker = self._worker
        if worker is None and (wait := self._restart_wait_s()):  # the batch runs in the new worker
            await asyncio.get_running_loop().run_in_executor(None, self._serving.wait, wait)
            with self._lock:
                worker = None if self._closing else self._worker
        if worker is None:
            error = NaiadError(
                f"python model '{self.model_name}' instance '{self.name}' is restarting after its process died; "
                "retry the request",
                ErrorCode.UNAVAILABLE,
            )
            fail_requests(requests, error)
            return
        tensors = [tensor for request in requests for tensor in request.inputs.values()]
        arena, specs, fd = worker.inputs.write(tensors)
        entries, cursor, keys = [], 0, []
        for request in requests:
            key = next(self._keys)
            keys.append(key)
            count = len(request.inputs)
            entries.append(
                {
                    "key": key,
                    "id": request.id,
                    "model_name": request.model_name,
                    "model_version": request.model_version,
                    "inputs": specs[cursor : cursor + count],
                    "outputs": list(request.requested_outputs),
                    "parameters": request.parameters,
                    "correlation_id": request.correlation_id,
                    "flags": request.flags,
                    "timeout_us": request.timeout_us,
                    "cancelled": request.is_cancelled(),
                }
            )
            cursor += count
        loop = asyncio.get_running_loop()
        batch = _Batch(requests, loop)
        with self._lock:
            lost = self._worker is not worker  # it died while the inputs were written
            if not lost:
                for key, request in zip(keys, requests, strict=True):
                    self._pending[key] = request
                self._batches[keys[0]] = batch
        if lost:
            fail_requests(requests, self._died("it died before the request reached it"))
            return
        cancels = [partial(self._cancel, worker, key) for key in keys]
        for cancel, request in zip(cancels, requests, strict=True):
            request.cancellation.add_callback(cancel)
        if not self._decoupled and not worker.watched:
            self._watch_control(worker, loop)
        message = {"op": "execute", "batch": keys[0], "arena": arena, "requests": entries}
        batch.sent_ns = time.monotonic_ns()
        try:
            worker.channel.send(message, None if fd is None else [fd])
        except ChannelClosed:
            pass  # the reader sees the same and fails the batch
        finally:
            if fd is not None:
                os.close(fd)
        timeout = _execute_timeout(requests)
        if timeout is None:
            await batch.future
        else:
            try:
                await asyncio.wait_for(asyncio.shield(batch.future), timeout + HANG_GRACE_S)
            except TimeoutError:
                worker.killed_because = (
                    f"it was killed: execute ran {HANG_GRACE_S:.0f} s past the requests' timeout of "
                    f"{timeout * 1000:.0f} ms"
                )
                worker.process.kill()
                await batch.future  # ended by the reader thread once the worker is gone
        if batch.executed is not None:
            self._finish(worker, batch, requests, keys, cancels)

    def _watch_control(self, worker: _Worker, loop: asyncio.AbstractEventLoop) -> None:
        """Have the event loop read the ends of non-decoupled batches from the worker's control socket.

        The loop reads a duplicate of the socket, which it closes itself when the worker goes away, so
        no other thread can close a descriptor the loop still polls."""
        watched = Channel(worker.control.sock.dup())
        loop.add_reader(watched.sock.fileno(), self._executed, worker, watched, loop)
        os.set_blocking(watched.sock.fileno(), True)  # uvloop made the socket (shared with senders) non-blocking
        worker.watched = True

    def _executed(self, worker: _Worker, watched: Channel, loop: asyncio.AbstractEventLoop) -> None:
        """Batches ended in the worker (on the loop): wake their ``execute``s. One read may bring the
        ends of several batches; the socket is not readable again for those read along."""
        try:
            self._batch_ended(worker, *watched.receive(readable=True))
            while watched.buffered():
                self._batch_ended(worker, *watched.receive())
        except ChannelClosed:  # the reader thread fails what the worker held
            loop.remove_reader(watched.sock.fileno())
            watched.sock.close()

    def _batch_ended(self, worker: _Worker, message: Message, fds: list[int]) -> None:
        """Hand a batch its worker's ``executed`` message and the new arenas its responses are in."""
        with self._lock:
            batch = self._batches.pop(message["batch"], None)
        worker.inputs.released()
        if batch is None:  # its worker was taken for dead meanwhile
            for fd in fds:
                os.close(fd)
            return
        batch.arrived(message, fds)
        batch.end()

    def _finish(
        self,
        worker: _Worker,
        batch: _Batch,
        requests: Sequence[InferenceRequest],
        keys: Sequence[int],
        cancels: Sequence[Callable[[], None]],
    ) -> None:
        """Report the batch's compute, mark the requests the model rescheduled, then send the responses
        its ``execute`` returned (a decoupled model's returns none); the worker reuses their space at its
        next batch."""
        assert batch.executed is not None
        report_compute(requests, batch.sent_ns, batch.executed_ns)
        for reply in batch.executed["responses"]:
            self._adopt(worker.returned, reply, batch.fds)
            self._respond(worker.returned, reply)
        for index in batch.executed.get("later", ()):
            requests[index].answered_later = True
        for index in batch.executed.get("rescheduled", ()):  # its next run goes under a new key
            requests[index].rescheduled = True
            requests[index].cancellation.remove_callback(cancels[index])
            with self._lock:
                self._pending.pop(keys[index], None)

    def _cancel(self, worker: _Worker, key: int) -> None:
        with contextlib.suppress(ChannelClosed):
            worker.control.send({"op": "cancel", "key": key})

    async def is_ready(self) -> bool:
        """False while the worker restarts; otherwise the model's own ``is_ready()`` (5 s at most)."""
        with self._lock:
            worker = self._worker
        if worker is None:
            return False
        future: Future[bool] = Future()
        token = next(self._keys)
        self._ready[token] = future
        try:
            worker.control.send({"op": "is_ready", "token": token})
            return await asyncio.wait_for(asyncio.wrap_future(future), in_process.IS_READY_TIMEOUT_S)
        except TimeoutError:
            _log.warning("is_ready() of model '%s' took more than %g s", self.model_name, in_process.IS_READY_TIMEOUT_S)
            return False
        except ChannelClosed:
            return False
        finally:
            self._ready.pop(token, None)

    def finalize(self) -> None:
        """Let the model's ``finalize()`` run in the worker (30 s at most), then stop the worker."""
        with self._lock:
            self._closing = True
            worker = self._worker
        self._serving.set()  # a batch waiting for a restart stops waiting
        if worker is None:
            self._calls.close()
            self._forget_restart_count()
            return
        try:
            worker.channel.send({"op": "finalize"})
            worker.process.wait(FINALIZE_TIMEOUT_S)
        except ChannelClosed:
            pass
        except subprocess.TimeoutExpired:
            _log.error(
                "python model '%s' instance '%s': finalize() took longer than %.0f s; its process is killed",
                self.model_name,
                self.name,
                FINALIZE_TIMEOUT_S,
            )
        worker.kill()
        self._calls.close()
        self._forget_restart_count()

    def _forget_restart_count(self) -> None:
        if self._restart_series is not None:
            family, series = self._restart_series
            family.remove(series)

    @property
    def pid(self) -> int | None:
        """The worker's process id (None while it restarts)."""
        worker = self._worker
        return None if worker is None else worker.process.pid


def _restart_series(context: InstanceContext) -> tuple[MetricFamily, Metric] | None:
    """The instance's series of ``naiad_python_worker_restarts``, and its family (none without a server)."""
    if context.server is None:
        return None
    family = context.server.metrics.family(
        RESTARTS_FAMILY,
        "Worker processes of python model instances started again after one died",
        "counter",
        backend="python",
    )
    labels = {"model": context.model_name, "version": str(context.version), "instance": context.name}
    return family, family.metric(labels)


def _execute_timeout(requests: Sequence[InferenceRequest]) -> float | None:
    """The batch's timeout in seconds: the longest of its requests' timeouts, or none when a request
    has none (a ``timeout`` request parameter, Triton's, sets one). The worker is killed when
    ``execute`` runs :data:`HANG_GRACE_S` past it (a caller that gave up may cancel it meanwhile)."""
    timeouts = [request.timeout_us for request in requests]
    if not timeouts or not all(timeouts):
        return None
    return max(timeouts) / 1e6
