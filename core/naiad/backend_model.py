"""The objects a backend hands back to naiad: a loaded model and its instances.

``naiad_load_model`` returns a :class:`BackendModel` and ``naiad_create_instance`` a
:class:`ModelInstance`; naiad then calls their methods directly, so serving a request costs no
hook call.

The execution contract (:meth:`ModelInstance.execute`): a scheduler hands the instance one batch at
a time, a sync ``execute`` on the instance's own worker thread, an ``async def execute`` on the
server's event loop. The instance answers every request through ``request.sender``:

* non-decoupled models send exactly one response with ``final=True`` per request;
* decoupled models send zero or more responses and then exactly one ``final=True`` (with a last
  response, or ``None`` for a flag-only final), from any thread, even after ``execute`` returned.

A non-decoupled request left unanswered when ``execute`` returns is answered by naiad with an error
naming the model, and an exception escaping ``execute`` fails every unanswered request of the batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

from naiad.inference import InferenceRequest
from naiad.protocol.model_config_pb2 import ModelConfig


class BackendModel:
    """A loaded model version, shared by its instances. Subclass or use as is."""

    def configured(self, config: ModelConfig) -> None:
        """The config is final (completed, defaults filled, validated); instances come next.

        The place to act on the final instance groups and batching settings, e.g. to drop
        something opened at load that no instance will use.
        """

    def finalize(self) -> None:
        """Release model-level resources; called once after every instance is finalized."""


class ModelInstance:
    """One independently executing copy of a model; the hot path calls ``execute``.

    ``execute`` and ``is_ready`` may each be a plain method (run on a thread) or ``async def``
    (run on the server's event loop, where it must never block).
    """

    def execute(self, requests: Sequence[InferenceRequest]) -> Awaitable[None] | None:
        """Run one batch and answer each request through ``request.sender``."""
        raise NotImplementedError

    def is_ready(self) -> bool | Awaitable[bool]:
        """Backend-level readiness for model-ready checks; naiad never calls it on the event loop
        unless it is ``async def``."""
        return True

    def finalize(self) -> None:
        """Release the instance's resources; called once on unload."""
