"""A per-instance asyncio event loop on its own thread, for ``async def`` model methods.

Like Triton's stub, each instance gets one loop, started on first use. Non-decoupled
``async def execute`` coroutines run on it while the instance's worker thread waits for
the result; decoupled ones run in the background so the next batch can start.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoopThread:
    """Owns an event loop running forever on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._run, args=(loop,), name=f"naiad-python-loop-{self._name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; returns a thread-safe future (read a failure's exception
        with :func:`raised`)."""
        return asyncio.run_coroutine_threadsafe(_contained(coroutine), self._ensure())

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (``TimeoutError`` after ``timeout``)."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise
        except _Escaped as escaped:
            raise escaped.error from None

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what is still running, stop the loop and close it."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(TimeoutError, concurrent.futures.CancelledError):
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


class _Escaped(Exception):
    """A ``KeyboardInterrupt`` or ``SystemExit`` a coroutine raised, carried out of the loop (asyncio lets
    them stop the loop, which would leave every waiting caller waiting for good)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


async def _contained(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return await coroutine
    except (KeyboardInterrupt, SystemExit) as error:
        raise _Escaped(error) from None


def raised(future: concurrent.futures.Future[Any]) -> BaseException | None:
    """What the coroutine of a :meth:`EventLoopThread.submit` future raised, if anything."""
    error = future.exception()
    return error.error if isinstance(error, _Escaped) else error


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
