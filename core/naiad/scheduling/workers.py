"""What every scheduler shares: its named worker threads, how long they wait, and its refusal once stopping."""

from __future__ import annotations

import threading
from collections.abc import Callable

from naiad.errors import NaiadError, unavailable


class WorkerThreads:
    """A scheduler's daemon threads, started by name and joined together on stop."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def __len__(self) -> int:
        return len(self._threads)

    def spawn(self, name: str, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()


def seconds_until(moment_ns: int | None, now_ns: int) -> float | None:
    """How long a thread waits for ``moment_ns`` (None: until woken). At most what a thread can wait
    for (``threading.TIMEOUT_MAX``, about 292 years; a request's timeout may ask for more), after
    which it looks again."""
    if moment_ns is None:
        return None
    return min(max(moment_ns - now_ns, 0) / 1e9, threading.TIMEOUT_MAX)


def unloading_error(model: str) -> NaiadError:
    """The answer to a request that reaches a scheduler which is stopping."""
    return unavailable(f"model '{model}' is unloading and accepts no new requests")
