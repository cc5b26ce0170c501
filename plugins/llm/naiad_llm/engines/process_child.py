"""The engine process: ``python -m naiad_llm.engines.process_child FD [CPUS]`` serves one engine on
socket FD, its threads kept to the CPUs ``CPUS`` names (``1,2,3``) when given.

It runs the engine on its own event loop, each request as a task, and sends the outputs every
request gained during one turn of the loop as one message (requests' first outputs first), with the
engine's load when a request started or ended or 10 ms have passed. What it logs goes
to the server, which logs it in its own format, file and level. When the server closes the socket
(it stopped, or it died) the engine stops and the process exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
import traceback
from typing import Any

from naiad.backend import ErrorCode, NaiadError, new_event_loop, settle_heap
from naiad_llm.engine import LOAD_REFRESH_S, Engine, GenerationRequest
from naiad_llm.engines import EngineSettings, create_engine
from naiad_llm.engines.process_wire import Frames, OutputFields, frame, output_fields, parse_cpu_list

logger = logging.getLogger(__name__)


class EngineChild:
    """Runs requests on the engine and batches their outputs, one message per turn of the loop."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._model = "?"
        self._engine: Engine | None = None
        self._starting: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._first: list[tuple[str, OutputFields]] = []  # requests' first outputs, sent first
        self._pending: list[tuple[str, OutputFields]] = []
        self._flush_scheduled = False
        self._load_changed = False  # a request started or ended since the load was last sent
        self._load_sent = 0.0  # loop time
        self._done: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None

    async def serve(self) -> None:
        """Serve until told to stop or the server goes away; then stop the engine."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._transport, _ = await loop.create_unix_connection(lambda: _ChildProtocol(self), sock=self._sock)
        logging.getLogger().addHandler(_ForwardedLogs(self, loop))
        try:
            await self._done
        finally:
            tasks = [*self._tasks.values(), *([self._starting] if self._starting is not None else [])]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._engine is not None:
                await self._engine.stop()

    def received(self, message: Any) -> None:
        kind = message[0]
        if kind == "start":
            _, name, settings, level = message
            logging.getLogger().setLevel(level)
            self._starting = asyncio.get_running_loop().create_task(self._start(name, settings))
        elif kind == "add":
            request: GenerationRequest = message[1]
            logger.debug("model '%s': request %s joins the engine", self._model, request.request_id)
            self._tasks[request.request_id] = asyncio.get_running_loop().create_task(self._run(request))
        elif kind == "log_level":
            logging.getLogger().setLevel(message[1])
        elif kind == "abort":
            task = self._tasks.get(message[1])
            if task is not None:
                task.cancel()
        elif kind == "stop":
            self.finish()

    def finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def write(self, message: Any) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(frame(message))

    async def _start(self, name: str, settings: EngineSettings) -> None:
        self._model = settings.model_name
        try:
            self._engine = create_engine(name, settings)
            info = await self._engine.start()
        except NaiadError as error:
            self.write(("failed", error.message, error.code))
            self.finish()
        except Exception as error:
            logger.exception("model '%s': the %s engine failed to start", settings.model_name, name)
            message = f"model '{settings.model_name}': the {name} engine failed to start: {error}"
            self.write(("failed", message, ErrorCode.INTERNAL))
            self.finish()
        else:
            settle_heap()  # this process serves the engine from now on
            self.write(("ready", info))

    async def _run(self, request: GenerationRequest) -> None:
        assert self._engine is not None, "a request came before the engine started"
        first = True  # a request's first output goes out ahead of the turn's other outputs
        try:
            async for output in self._engine.generate(request):
                if first:  # it runs: the load its first output travels with counts it
                    self._first.append((request.request_id, output_fields(output)))
                    self._load_changed, first = True, False
                else:
                    self._pending.append((request.request_id, output_fields(output)))
                self._schedule_flush()
        except NaiadError as error:
            self.write(("error", request.request_id, error.message, error.code))
        except asyncio.CancelledError:
            pass  # aborted: the server no longer waits for it
        except Exception as error:
            logger.exception("model '%s': generating request %s failed", self._model, request.request_id)
            message = f"model '{self._model}': generation failed: {error}"
            self.write(("error", request.request_id, message, ErrorCode.INTERNAL))
        finally:
            self._tasks.pop(request.request_id, None)
            self._load_changed = True
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send the outputs gained this turn, with the engine's load when a request started or ended or
        it is due.

        Requests' first outputs lead, so the server answers them first: a new request's time to first
        token does not wait behind the tokens of every request already streaming."""
        self._flush_scheduled = False
        pending, self._first, self._pending = [*self._first, *self._pending], [], []
        assert self._engine is not None
        now = asyncio.get_running_loop().time()
        load = None
        if self._load_changed or now - self._load_sent >= LOAD_REFRESH_S:
            load, self._load_changed, self._load_sent = self._engine.stats(), False, now
        self.write(("outputs", pending, load))


class _ChildProtocol(asyncio.Protocol):
    def __init__(self, child: EngineChild) -> None:
        self._child = child
        self._frames = Frames()

    def data_received(self, data: bytes) -> None:
        for message in self._frames.feed(data):
            self._child.received(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._child.finish()  # the server stopped or died


class _ForwardedLogs(logging.Handler):
    """Sends each log record to the server, from whichever thread logs it."""

    def __init__(self, child: EngineChild, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._child = child
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info is not None and record.exc_info[0] is not None:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        message = ("log", record.levelno, record.name, text)
        if threading.get_ident() == self._loop_thread:
            self._child.write(message)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._child.write, message)


def main(fd: int, cpus: list[int] | None = None) -> None:
    """Serve the engine on the socket ``fd`` until the server says stop or goes away. ``cpus``: the CPUs
    every thread keeps to, set before the engine starts any (threads take their creator's CPUs)."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    sock = socket.socket(fileno=fd)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(EngineChild(sock).serve())


if __name__ == "__main__":
    main(int(sys.argv[1]), parse_cpu_list(sys.argv[2]) if len(sys.argv) > 2 else None)
