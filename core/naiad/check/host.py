"""The server handle backends get during ``naiad check``: an event loop and the server's services, with
no frontend, no port and no model serving, so a backend loads a model for auto-complete as in the server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from naiad.lifecycle import ModelLifecycle
from naiad.loading import LoadOptions
from naiad.loop_thread import LoopThread
from naiad.plugins import BackendRegistry


class CheckHost:
    """Runs an event loop on a thread and offers :attr:`handle` over an empty model lifecycle; a context manager."""

    def __init__(self, registry: BackendRegistry, repositories: Sequence[Path], options: LoadOptions) -> None:
        self._loop = LoopThread("naiad-check-loop")
        self.handle = self._loop.serve(ModelLifecycle(registry, repositories, options))

    def __enter__(self) -> CheckHost:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._loop.stop()
