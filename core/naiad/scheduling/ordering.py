"""``preserve_ordering``: responses leave in the order their requests arrived."""

from __future__ import annotations

import threading
from collections.abc import Callable

from naiad.inference import ResponseEvent, ResponseSender

Deliver = Callable[[ResponseEvent], None]


class OrderedRelease:
    """Holds back each request's events until every earlier request has sent its final one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued = 0
        self._next = 0
        self._held: dict[int, list[tuple[ResponseEvent, Deliver]]] = {}

    def register(self, sender: ResponseSender) -> None:
        """Give the sender the next place in line (call in arrival order)."""
        with self._lock:
            place = self._issued
            self._issued += 1
        sender.relay_through(lambda event, deliver: self._arrive(place, event, deliver))

    def _arrive(self, place: int, event: ResponseEvent, deliver: Deliver) -> None:
        with self._lock:
            if place != self._next:
                self._held.setdefault(place, []).append((event, deliver))
                return
            deliver(event)
            if not event.final:
                return
            self._next += 1
            while self._next in self._held:
                events = self._held.pop(self._next)
                for held_event, held_deliver in events:
                    held_deliver(held_event)
                if not events[-1][0].final:
                    return
                self._next += 1
