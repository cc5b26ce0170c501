"""The boundary between the data plane and whatever forms batches and runs instances."""

from __future__ import annotations

from abc import ABC, abstractmethod

from naiad.inference import InferenceRequest


class Scheduler(ABC):
    """Accepts validated requests for one model version and gets them executed.

    ``submit`` is called on the event loop and must not block; responses travel back
    through each request's sender. ``stop`` finishes everything already accepted before
    it returns, so nothing accepted is lost on unload or shutdown.
    """

    @abstractmethod
    def start(self) -> None:
        """Start the worker threads."""

    @abstractmethod
    def submit(self, request: InferenceRequest) -> None:
        """Queue one request; raise :class:`naiad.errors.NaiadError` to refuse it."""

    @abstractmethod
    def stop(self) -> None:
        """Finish every accepted request, then stop the workers."""
