"""A request's cancellation token, shared by the request and its response sender.

The frontend (client gone, call cancelled, deadline passed) or a parent request cancels the token;
schedulers drop a queued request whose token is cancelled, backends poll :attr:`cancelled` or
register a callback (an engine that aborts a running sequence, a child request to cancel with its
parent).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

Callback = Callable[[], None]

# Guards every token's callback list: registering callbacks is rare, so one lock serves all tokens
# and a token costs no lock of its own.
_callbacks_lock = threading.Lock()


class CancellationToken:
    """Set once, from any thread; callbacks run once, on the thread that cancels."""

    __slots__ = ("_callbacks", "cancelled")

    def __init__(self) -> None:
        self.cancelled = False
        self._callbacks: list[Callback] | None = None

    def cancel(self) -> None:
        """Cancel; run the registered callbacks (a failing callback is logged, the others still run)."""
        if self.cancelled:
            return
        with _callbacks_lock:
            self.cancelled = True
            callbacks, self._callbacks = self._callbacks or [], None
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a cancellation callback failed")

    def add_callback(self, callback: Callback) -> None:
        """Call ``callback()`` on cancellation; at once if the token is already cancelled."""
        with _callbacks_lock:
            if not self.cancelled:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback()

    def remove_callback(self, callback: Callback) -> None:
        """Forget a callback that has not run (no-op otherwise)."""
        with _callbacks_lock:
            if self._callbacks is not None and callback in self._callbacks:
                self._callbacks.remove(callback)
