"""An event loop on a daemon thread, standing in for the server's loop where no server runs: models loaded
in-process by ``naiad.testing`` and the auto-complete loads of ``naiad check``."""

from __future__ import annotations

import asyncio
import threading

from naiad.lifecycle import ModelLifecycle
from naiad.metrics.custom import CustomMetrics
from naiad.server_handle import ServerHandle
from naiad.service import InferenceService
from naiad.sinks import LoopInbox

_STOP_TIMEOUT_S = 5.0


class LoopThread:
    """Runs an event loop (and its inbox) on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.inbox = LoopInbox()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.inbox.attach(self.loop)
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        ready.wait()

    def serve(self, lifecycle: ModelLifecycle) -> ServerHandle:
        """A server handle over ``lifecycle`` on this loop (no frontend, no port), set as its server."""
        lifecycle.server = ServerHandle(InferenceService(lifecycle), self.inbox, CustomMetrics())
        return lifecycle.server

    def stop(self) -> None:
        """Stop the loop; close it once its thread ended."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()
