"""The boundary between the data plane and whatever admits, batches and executes a model's requests."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from naiad.inference import InferenceRequest
from naiad.pipeline import ResponseStage


class Scheduler(ABC):
    """Accepts validated requests for one model version and gets them executed.

    ``submit`` may be called from any thread (the event loop, a backend's worker thread) and must
    not block; responses travel back through each request's sender. ``stop`` finishes everything
    already accepted before it returns, so nothing accepted is lost on unload or shutdown.
    """

    @abstractmethod
    def start(self) -> None:
        """Start working (threads, engine loops)."""

    @abstractmethod
    def submit(self, request: InferenceRequest) -> None:
        """Queue one request; raise :class:`naiad.errors.NaiadError` to refuse it."""

    @abstractmethod
    def stop(self) -> None:
        """Finish every accepted request, then stop."""

    def ready(self) -> bool:
        """Whether the scheduler can serve now (one that runs other models' requests asks them); called
        for model-ready checks, never on the request path."""
        return True

    def stages(self) -> Sequence[ResponseStage]:
        """Response-pipeline stages this scheduler needs, in order (e.g. to release responses in order)."""
        return ()
