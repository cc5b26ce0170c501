"""Running the batches of async instances on the server's event loop, with no thread in between.

When every instance of a model has an ``async def execute`` (:attr:`InstanceRunner.is_async`), its
scheduler needs no worker threads: a :class:`LoopDispatch` gives the next batch to each idle instance
on the loop, as soon as the loop runs after a request arrived (so requests that arrive in the same
turn of the loop share a batch), and at the loop's next turn after an instance finishes (so requests
the loop reads later in the turn in which the batch ended join the next batch, instead of waiting
behind a batch taken before them). A scheduler with sync instances keeps a worker thread per
instance; an async instance behind one would pay two thread hand-offs per batch for nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from naiad.inference import InferenceRequest
from naiad.logs import model_logging_context
from naiad.scheduling.execution import InstanceRunner

Take = Callable[[InstanceRunner, bool], Sequence[InferenceRequest] | None]
"""The scheduler's next batch for an idle instance (``flush``: the scheduler is stopping, take what is
queued), or None."""

Wakeup = Callable[[], float | None]
"""Seconds until the scheduler needs a look although nothing arrived (None: not before a request does);
it may answer queued requests that timed out or were cancelled meanwhile."""


def all_async(runners: Sequence[InstanceRunner]) -> bool:
    """Whether a scheduler should drive ``runners`` from the loop: every one is an async instance, and
    none waits for the rate limiter (a wait that blocks, so it stays on a worker thread)."""
    return bool(runners) and all(runner.is_async and not runner.rate_limited for runner in runners)


class LoopDispatch:
    """Hands batches to idle async instances on their event loop; see the module docstring.

    ``take`` and ``wakeup`` are called on the loop only; :meth:`poke` from any thread.
    """

    def __init__(self, runners: Sequence[InstanceRunner], take: Take, wakeup: Wakeup) -> None:
        loop = runners[0].loop
        assert loop is not None
        self._loop = loop
        info = runners[0].info
        self._context = model_logging_context(info.model_name, info.version)  # what it logs names the model
        self._idle = list(runners)
        self._running: set[asyncio.Task[None]] = set()  # the tasks of the batches running now
        self._take = take
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._poked = False  # a pump is scheduled
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._stopped = threading.Event()

    def poke(self) -> None:
        """Have the loop look for work soon (once however many times this is called before it does)."""
        with self._lock:
            if self._poked:
                return
            self._poked = True
        if _running_loop() is self._loop:
            self._loop.call_soon(self._pump, context=self._context)
        else:
            self._loop.call_soon_threadsafe(self._pump, context=self._context)

    def stop(self) -> None:
        """Run what is queued and wait for every batch to end; call from any thread but the loop's."""
        if _running_loop() is self._loop:
            raise RuntimeError("a scheduler of async instances cannot be stopped from its own event loop")
        self._stopping = True
        self.poke()
        self._stopped.wait()

    def _pump(self) -> None:
        with self._lock:
            self._poked = False
        drained = False
        while self._idle:
            requests = self._take(self._idle[-1], self._stopping)
            if requests is None:
                drained = True
                break
            task = self._loop.create_task(self._run(self._idle.pop(), requests))
            self._running.add(task)
        if self._stopping and drained and not self._running:
            self._stopped.set()
            return
        self._arm_timer()

    async def _run(self, runner: InstanceRunner, requests: Sequence[InferenceRequest]) -> None:
        try:
            await runner.execute_async(requests)
        finally:
            del requests  # a finished batch's tensors must not wait for the next one
            self._running.discard(asyncio.current_task())
            self._idle.append(runner)
            self.poke()

    def _pump_if_needed(self) -> None:
        if not self._poked:
            self._pump()

    def _arm_timer(self) -> None:
        """Look again when the scheduler asked to (a queue delay ends, a queued request times out)."""
        delay = self._wakeup()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if delay is not None:
            self._timer = self._loop.call_later(delay, self._pump_if_needed, context=self._context)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
