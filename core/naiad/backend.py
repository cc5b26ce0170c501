"""What a backend receives from naiad and what it hands back.

A backend plugin implements two lifecycle hooks (see :mod:`naiad.hookspecs`):
``naiad_load_model`` returns a :class:`BackendModel` and ``naiad_create_instance``
returns a :class:`ModelInstance`. After that, naiad calls the returned objects' methods
directly: the per-request path never goes through pluggy.

The execution contract (:meth:`ModelInstance.execute`): naiad calls ``execute`` with a
batch of requests on the instance's own worker thread, one batch at a time. The
instance answers every request through ``request.sender``:

* non-decoupled models send exactly one response with ``final=True`` per request;
* decoupled models send zero or more responses and then exactly one ``final=True``
  (with a last response, or ``None`` for a flag-only final), from any thread, even
  after ``execute`` has returned.

A non-decoupled request left unanswered when ``execute`` returns is answered by naiad
with an error naming the model, and an exception escaping ``execute`` fails every
unanswered request of the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naiad.inference import InferenceRequest
from naiad.protocol.model_config_pb2 import ModelConfig


@dataclass(slots=True)
class ModelLoadContext:
    """Everything a backend needs to load one version of a model.

    ``config`` is the model's configuration as read from ``config.pbtxt`` with the
    backend, platform and default file name filled in. When ``auto_complete`` is true
    the backend may complete it in place (inputs, outputs, ``max_batch_size``,
    ``dynamic_batching``, ``model_transaction_policy``); naiad then fills in the
    remaining defaults and validates the result.
    """

    model_name: str
    version: int
    model_dir: Path
    config: ModelConfig
    auto_complete: bool
    backend_config: Mapping[str, str] = field(default_factory=dict)

    @property
    def version_dir(self) -> Path:
        """The version folder, e.g. ``<repo>/add_sub/1``."""
        return self.model_dir / str(self.version)

    @property
    def model_file(self) -> Path:
        """The model file or folder inside the version folder (``default_model_filename``)."""
        return self.version_dir / self.config.default_model_filename


@dataclass(slots=True)
class InstanceContext:
    """One model instance to create: its name, device and the final model config.

    ``kind`` is ``"CPU"``, ``"GPU"`` or ``"MODEL"``; ``device_id`` is the GPU ordinal
    (0 for CPU and MODEL instances). ``config_json`` is the normalised config in Triton's
    JSON rendering (what the ``/config`` endpoint serves).
    """

    model_name: str
    version: int
    model_dir: Path
    name: str
    kind: str
    device_id: int
    config: ModelConfig
    config_json: str


class BackendModel:
    """A loaded model version, shared by its instances. Subclass or use as is."""

    def finalize(self) -> None:
        """Release model-level resources; called once after every instance is finalized."""


class ModelInstance:
    """One independently executing copy of a model; the hot path calls ``execute``."""

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        """Run one batch and answer each request through ``request.sender``."""
        raise NotImplementedError

    def is_ready(self) -> bool:
        """Backend-level readiness, consulted by model-ready checks."""
        return True

    def finalize(self) -> None:
        """Release the instance's resources; called once on unload."""
