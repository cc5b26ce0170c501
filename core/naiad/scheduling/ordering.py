"""``preserve_ordering``: responses leave in the order their requests arrived."""

from __future__ import annotations

import threading

from naiad.inference import Deliver, ResponseEvent, ResponseSender


class OrderedRelease:
    """A response-pipeline stage holding back each request's events until every earlier request
    has sent its final one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued = 0
        self._next = 0
        self._held: dict[int, list[tuple[ResponseSender, ResponseEvent]]] = {}

    def register(self, sender: ResponseSender) -> None:
        """Give the sender the next place in line (call in arrival order)."""
        with self._lock:
            sender.place = self._issued
            self._issued += 1

    def bind(self, forward: Deliver) -> Deliver:
        def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
            self._arrive(sender, event, forward)

        return deliver

    def _arrive(self, sender: ResponseSender, event: ResponseEvent, forward: Deliver) -> None:
        if sender.place < 0:  # never registered (a padding request): nothing to order
            forward(sender, event)
            return
        with self._lock:
            if sender.place != self._next:
                self._held.setdefault(sender.place, []).append((sender, event))
                return
            forward(sender, event)
            if not event.final:
                return
            self._next += 1
            while self._next in self._held:
                events = self._held.pop(self._next)
                for held_sender, held_event in events:
                    forward(held_sender, held_event)
                if not events[-1][1].final:
                    return
                self._next += 1
