"""naiad's event loop on a thread of its own, for a program that embeds the server.

The loop runs ``async def`` instances and the server's own coroutines (start, drain, close, model
loads); the embedding program's threads and event loops hand it work with :meth:`LoopThread.run`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def on_loop(self) -> bool:
        """Whether the calling thread is the loop's own."""
        return threading.current_thread() is self._thread

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result; call from any other thread."""
        if self.on_loop():
            coroutine.close()
            raise RuntimeError("this call would block naiad's event loop; make it from another thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stop the loop, wait for its thread and close it."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
