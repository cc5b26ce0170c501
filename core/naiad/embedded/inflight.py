"""The in-process requests accepted and not yet answered in full, which a graceful stop waits for."""

from __future__ import annotations

import threading
import time

from naiad.inference import ResponseEvent, ResponseSink


class InFlight:
    """Counts requests from submission to their final response event; thread-safe."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def track(self, sink: ResponseSink) -> TrackedSink:
        """Count one request whose events go to ``sink``, until its final event or :meth:`TrackedSink.abandon`."""
        with self._idle:
            self._count += 1
        return TrackedSink(sink, self)

    def finish(self) -> None:
        """One request is answered in full (or was refused)."""
        with self._idle:
            self._count -= 1
            if not self._count:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._count:
                left = deadline - time.monotonic()
                if left <= 0 or not self._idle.wait(left):
                    return not self._count
        return True


class TrackedSink:
    """Passes a request's events on to its sink and ends its count with the final one."""

    __slots__ = ("_counted", "_in_flight", "_sink")

    def __init__(self, sink: ResponseSink, in_flight: InFlight) -> None:
        self._sink = sink
        self._in_flight = in_flight
        self._counted = True

    def deliver(self, event: ResponseEvent) -> None:
        try:
            self._sink.deliver(event)
        finally:
            if event.final:
                self.abandon()

    def abandon(self) -> None:
        """End the count without a final event (the request was refused)."""
        if self._counted:
            self._counted = False
            self._in_flight.finish()
