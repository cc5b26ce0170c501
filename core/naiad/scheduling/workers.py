"""What every scheduler shares: its named worker threads and its refusal once stopping."""

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


def unloading_error(model: str) -> NaiadError:
    """The answer to a request that reaches a scheduler which is stopping."""
    return unavailable(f"model '{model}' is unloading and accepts no new requests")
