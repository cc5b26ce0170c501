"""An engine in a process of its own, so its Python never waits for the server's, nor the server's for it.

An engine such as transformers' runs Python on every decoding step (scheduling, sampling, the
model's modules), as the server does for every request and every streamed token. In one process they
take turns on the GIL, and each makes the other slower. :class:`EngineProcess` runs the engine in a
child process (the same design as vLLM's engine-core process) and speaks to it over a socket pair
with small pickled messages (:mod:`~naiad_llm.engines.process_wire`): requests, aborts and the
server's log level when it changed one way; the other way, once per turn of the child's event loop,
the outputs every request gained meanwhile, with the engine's load (every 10 ms at most while tokens
flow, and whenever a request starts or ends). Outputs of a request that arrive before its generator
took the last one are merged into one. The engine's info, its tokenizer included, comes over once, when the
engine has started.

On the CPU the child keeps to every CPU the server may use but the first (:func:`engine_cpus`): the
engine's threads, its event loop's included, stay off the CPU left to the server's event loop.

The child runs in a session of its own, so signals meant for the server's process group (a
terminal's Ctrl+C) reach only the server, which stops the engine after what it accepted is answered.
A child that dies (killed, out of memory, a crash in native code) fails the requests it was generating
with an error naming the model, and is restarted; requests meanwhile are answered UNAVAILABLE. The wait
before a restart grows from 0.1 s to 30 s while children keep dying within 30 s of starting. A child
whose server is gone stops its engine and exits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from naiad.backend import ErrorCode, NaiadError, describe_exit, unavailable
from naiad_llm.engine import Engine, EngineInfo, EngineStats, GenerationOutput, GenerationRequest
from naiad_llm.engines import EngineSettings
from naiad_llm.engines.process_wire import Frames, cpu_list, frame, output_from

logger = logging.getLogger(__name__)

CHILD_MODULE = "naiad_llm.engines.process_child"
STOP_TIMEOUT_S = 30.0
RESTART_BACKOFF_S = (0.1, 30.0)  # the first wait before a restart, and the longest


def child_environment(device: str) -> dict[str, str]:
    """The engine process's environment: the server's, and on the CPU one compute thread fewer than
    the CPUs the server may use (at least one), so the server's event loop keeps a core of its own.
    ``OMP_NUM_THREADS`` set for the server decides instead."""
    environment = dict(os.environ)
    if device == "cpu" and "OMP_NUM_THREADS" not in environment:
        environment["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) - 1))
    return environment


def engine_cpus(device: str) -> list[int] | None:
    """The CPUs the engine process keeps to on the CPU: every CPU the server may use but the first,
    one per compute thread, so the engine never takes the CPU left to the server's event loop (vLLM's
    CPU backend binds its threads likewise). None, no binding: on a GPU, with one CPU, or when
    ``OMP_NUM_THREADS`` set for the server leaves the threads and their placement to whoever set it."""
    cpus = sorted(os.sched_getaffinity(0))
    if device != "cpu" or "OMP_NUM_THREADS" in os.environ or len(cpus) < 2:
        return None
    return cpus[1:]


def merge(earlier: GenerationOutput, later: GenerationOutput) -> GenerationOutput:
    """One output carrying what two consecutive outputs of a request gained."""
    logprobs = None
    if earlier.logprobs is not None or later.logprobs is not None:
        logprobs = [*(earlier.logprobs or ()), *(later.logprobs or ())]
    return dataclasses.replace(
        later,
        text=earlier.text + later.text,
        token_ids=[*earlier.token_ids, *later.token_ids],
        logprobs=logprobs,
    )


class EngineProcess(Engine):
    """Runs the engine named ``engine`` for ``settings`` in a child process, and restarts a child that dies."""

    def __init__(self, engine: str, settings: EngineSettings) -> None:
        self._engine = engine
        self._settings = settings
        self._child: _ChildHandle | None = None
        self._requests: dict[str, _Outputs] = {}
        self._stats = EngineStats(running=0, waiting=0)
        self._log_level = logging.NOTSET  # the level the child logs at, as last sent
        self._unavailable: str | None = None  # why requests cannot be served now
        self._load_listener: Callable[[EngineStats], None] | None = None
        self._stopping = False
        self._restarting: asyncio.Task[None] | None = None
        self._backoff = RESTART_BACKOFF_S[0]

    async def start(self) -> EngineInfo:
        return await self._spawn()

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
        """The child hears of ``request`` now, not when iteration starts: a turn of the server's loop sooner."""
        if self._unavailable is not None:
            raise unavailable(self._unavailable)
        level = logging.getLogger().getEffectiveLevel()
        if level != self._log_level:  # changed through /v2/logging: the child's records follow
            self._log_level = level
            self._send(("log_level", level))
        outputs = _Outputs()
        self._requests[request.request_id] = outputs
        self._send(("add", request))
        return _Generation(self, request.request_id, outputs)

    async def abort(self, request_id: str) -> None:
        """The child stops generating the request; its generator ends at once with an "abort" output,
        as the engines' own do (the child sends nothing more for it)."""
        outputs = self._requests.pop(request_id, None)
        if outputs is not None:
            self._send(("abort", request_id))
            outputs.abort()

    def stats(self) -> EngineStats:
        return self._stats

    def on_load_change(self, listener: Callable[[EngineStats], None]) -> None:
        self._load_listener = listener

    async def stop(self) -> None:
        self._stopping = True
        if self._restarting is not None:
            self._restarting.cancel()
        child, self._child = self._child, None
        if child is None:
            return
        child.write(("stop",))
        try:
            await asyncio.to_thread(child.process.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            logger.warning(
                "model '%s': the %s engine process (pid %d) did not stop within %.0f s; killing it",
                self._settings.model_name,
                self._engine,
                child.process.pid,
                STOP_TIMEOUT_S,
            )
            child.process.kill()
            await asyncio.to_thread(child.process.wait)
        child.transport.close()

    async def _spawn(self) -> EngineInfo:
        """Start a child and its engine; raise what kept the engine from starting."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        cpus = engine_cpus(self._settings.device)
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-m", CHILD_MODULE, str(theirs.fileno()), *([] if cpus is None else [cpu_list(cpus)])],
                pass_fds=[theirs.fileno()],
                env=child_environment(self._settings.device),
                start_new_session=True,  # a terminal's Ctrl+C stops the server, which stops the engine
            )
        ready: asyncio.Future[EngineInfo] = loop.create_future()
        ended = f"model '{self._settings.model_name}': its {self._engine} engine process ended while starting"
        transport, _ = await loop.create_unix_connection(lambda: _Protocol(self, ready, ended), sock=ours)
        child = _ChildHandle(process, transport, loop.time())
        self._child = child
        self._log_level = logging.getLogger().getEffectiveLevel()
        child.write(("start", self._engine, self._settings, self._log_level))
        try:
            info = await ready
        except BaseException:
            self._child = None
            transport.close()
            if child.process.poll() is None:
                child.process.kill()
            await asyncio.shield(asyncio.to_thread(child.process.wait))
            raise
        self._unavailable = None
        return info

    def _send(self, message: Any) -> None:
        if self._child is not None and self._unavailable is None:
            self._child.write(message)

    def _ended(self, request_id: str, *, finished: bool) -> None:
        """A request's generator is done with it; the child stops generating it unless it finished
        (or was aborted: then it is no longer waited for)."""
        if self._requests.pop(request_id, None) is not None and not finished:
            self._send(("abort", request_id))

    def _load_changed(self, stats: EngineStats) -> None:
        self._stats = stats
        if self._load_listener is not None:
            self._load_listener(stats)

    def _received(self, message: Any) -> None:
        kind = message[0]
        if kind == "outputs":
            _, outputs, stats = message
            for request_id, fields in outputs:
                queue = self._requests.get(request_id)
                if queue is not None:
                    queue.put(output_from(fields))
            if stats is not None:
                self._load_changed(stats)
        elif kind == "error":
            _, request_id, text, code = message
            queue = self._requests.get(request_id)
            if queue is not None:
                queue.put(NaiadError(text, code))

    def _lost(self, transport: asyncio.BaseTransport) -> None:
        """A child closed its end: it stopped, or it died and is restarted."""
        child = self._child
        if self._stopping or child is None or child.transport is not transport:
            return
        self._child = None
        name = self._settings.model_name
        self._unavailable = f"model '{name}': its {self._engine} engine process died and is restarting; retry shortly"
        died = NaiadError(
            f"model '{name}': its {self._engine} engine process died while generating the request; it is restarting",
            ErrorCode.INTERNAL,
        )
        for queue in self._requests.values():
            queue.put(died)
        self._load_changed(EngineStats(running=0, waiting=0))
        self._restarting = asyncio.get_running_loop().create_task(self._restart(child))

    async def _restart(self, child: _ChildHandle) -> None:
        """Start a new child after a dead one, waiting longer while children keep dying soon after starting."""
        name = self._settings.model_name
        loop = asyncio.get_running_loop()
        try:
            status = await asyncio.to_thread(child.process.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.process.kill()
            status = await asyncio.to_thread(child.process.wait)
        lived = loop.time() - child.started
        if lived > RESTART_BACKOFF_S[1]:
            self._backoff = RESTART_BACKOFF_S[0]  # it ran a good while: no crash loop
        logger.error(
            "model '%s': the %s engine process (pid %d) died (it %s) after %.1f s; its requests failed; "
            "restarting it in %.1f s",
            name,
            self._engine,
            child.process.pid,
            describe_exit(status),
            lived,
            self._backoff,
        )
        while not self._stopping:
            wait, self._backoff = self._backoff, min(self._backoff * 2, RESTART_BACKOFF_S[1])
            await asyncio.sleep(wait)
            try:
                await self._spawn()
            except Exception as error:
                self._unavailable = f"model '{name}': its {self._engine} engine does not start again: {error}"
                logger.error("%s; next try in %.1f s", self._unavailable, self._backoff)
            else:
                logger.info("model '%s': the %s engine process is back", name, self._engine)
                return


@dataclasses.dataclass(slots=True)
class _ChildHandle:
    """One child process and the parent's end of its socket pair."""

    process: subprocess.Popen[bytes]
    transport: asyncio.Transport
    started: float  # loop time

    def write(self, message: Any) -> None:
        if not self.transport.is_closing():
            self.transport.write(frame(message))


class _Generation:
    """One request's outputs from the child until the finished one; closed early, iterated or not (or
    failed), it aborts the request."""

    __slots__ = ("_open", "_outputs", "_owner", "_request_id")

    def __init__(self, owner: EngineProcess, request_id: str, outputs: _Outputs) -> None:
        self._owner = owner
        self._request_id = request_id
        self._outputs = outputs
        self._open = True

    def __aiter__(self) -> _Generation:
        return self

    async def __anext__(self) -> GenerationOutput:
        if not self._open:
            raise StopAsyncIteration
        try:
            output = await self._outputs.next()
        except BaseException:
            await self.aclose()
            raise
        if output.finished:
            self._open = False
            self._owner._ended(self._request_id, finished=True)
        return output

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self._owner._ended(self._request_id, finished=False)


class _Outputs:
    """One request's outputs on their way to its generator; outputs that wait are merged into one."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[GenerationOutput | NaiadError] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def abort(self) -> None:
        """End the request here with an "abort" output, merged into an output still waiting (whose
        token counts it keeps)."""
        waiting = self._items[-1] if self._items else None
        counts = (
            (waiting.num_input_tokens, waiting.num_output_tokens) if isinstance(waiting, GenerationOutput) else (0, 0)
        )
        self.put(GenerationOutput("", [], *counts, finished=True, finish_reason="abort"))

    def put(self, item: GenerationOutput | NaiadError) -> None:
        items = self._items
        if items and isinstance(item, GenerationOutput) and isinstance(items[-1], GenerationOutput):
            items[-1] = merge(items[-1], item)
        else:
            items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self) -> GenerationOutput:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if isinstance(item, NaiadError):
            raise item
        return item


class _Protocol(asyncio.Protocol):
    """The parent's end of one child's socket pair: ``ready`` holds the engine's info once it started."""

    def __init__(self, owner: EngineProcess, ready: asyncio.Future[EngineInfo], ended: str) -> None:
        self._owner = owner
        self._ready = ready
        self._ended = ended  # the error if the child ends before its engine started
        self._frames = Frames()
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        for message in self._frames.feed(data):
            kind = message[0]
            if kind == "log":
                _, level, name, text = message
                logging.getLogger(name).log(level, "%s", text)
            elif kind == "ready":
                if not self._ready.done():
                    self._ready.set_result(message[1])
            elif kind == "failed":
                if not self._ready.done():
                    self._ready.set_exception(NaiadError(message[1], message[2]))
            else:
                self._owner._received(message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._ready.done():
            self._ready.set_exception(unavailable(f"{self._ended}; see the server log above"))
        elif self._transport is not None:
            self._owner._lost(self._transport)
