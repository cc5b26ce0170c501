"""What naiad hands a backend at each step: the backend, a model version, an instance, a scheduler."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from naiad.config.paths import confined_path
from naiad.inference import InferenceRequest
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.tracing import trace_executed, trace_started

if TYPE_CHECKING:
    from naiad.scheduling.execution import InstanceRunner
    from naiad.server_handle import ServerHandle
    from naiad.statistics import ModelStatistics

DEFAULT_MAX_BATCH_SIZE = 4
"""``default-max-batch-size`` when ``--backend-config`` sets none (Triton's default)."""


@dataclass(frozen=True, slots=True)
class BackendContext:
    """A backend about to load its first model.

    ``backend_config`` holds its ``--backend-config=<backend>,<key>=<value>`` settings;
    ``default_max_batch_size`` is ``--backend-config=[<backend>,]default-max-batch-size=N``
    (the backend's own setting first, then the global one, then 4).
    """

    name: str
    backend_config: Mapping[str, str]
    default_max_batch_size: int
    server: ServerHandle


@dataclass(slots=True)
class ModelLoadContext:
    """Everything a backend needs to load one version of a model.

    ``config`` is the model's configuration as read from ``config.pbtxt`` with the backend, platform
    and default file name filled in. When ``auto_complete`` is true the backend may complete it in
    place (inputs, outputs, ``max_batch_size``, ``dynamic_batching``,
    ``model_transaction_policy``); naiad then fills in the remaining defaults, validates the result
    and calls :meth:`naiad.backend.BackendModel.configured` with it.
    """

    model_name: str
    version: int
    model_dir: Path
    config: ModelConfig
    auto_complete: bool
    backend_config: Mapping[str, str] = field(default_factory=dict)
    default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    server: ServerHandle | None = None
    config_from_request: bool = False

    @property
    def version_dir(self) -> Path:
        """The version folder, e.g. ``<repo>/add_sub/1``."""
        return self.model_dir / str(self.version)

    @property
    def model_file(self) -> Path:
        """The model file or folder inside the version folder (``default_model_filename``)."""
        return self.path(self.config.default_model_filename, "default_model_filename", in_version=True)

    def path(self, relative: str, what: str, *, in_version: bool = False) -> Path:
        """A path the config names (``what``: the setting), relative to the model's folder (or its
        version folder), that stays inside the model's folder; else INVALID_ARG.

        Use it for every file a config or its parameters point at: a config can come with a load
        request, and then its paths are client input (see :mod:`naiad.config.paths`).
        """
        return confined_path(
            self.model_dir,
            relative,
            what,
            model=self.model_name,
            from_request=self.config_from_request,
            base=self.version_dir if in_version else None,
        )


@dataclass(frozen=True, slots=True)
class InstanceContext:
    """One model instance to create: its name, group, device and the final model config.

    ``name`` is Triton's ``<group>_<index>``: ``group`` is the instance group's name,
    ``group_index`` its position in ``config.instance_group`` and ``index`` the instance's number
    within the group. ``kind`` is ``"CPU"``, ``"GPU"`` or ``"MODEL"``; ``device_id`` is the GPU
    ordinal (0 for CPU and MODEL instances); ``profiles`` are the group's TensorRT optimization
    profiles. ``config_json`` is the config in Triton's JSON rendering (what ``/config`` serves).
    """

    model_name: str
    version: int
    model_dir: Path
    name: str
    kind: str
    device_id: int
    config: ModelConfig
    config_json: str
    group: str = ""
    group_index: int = 0
    index: int = 0
    profiles: tuple[str, ...] = ()
    server: ServerHandle | None = None


class SchedulerContext:
    """What a scheduler gets: the model version, its instances and the server.

    ``instances`` are :class:`~naiad.scheduling.execution.InstanceRunner` objects: run a batch
    with ``runner.execute(batch)`` on a worker thread (or ``await runner.execute_async(batch)`` on
    the server loop for async instances) and naiad enforces the execution contract and counts the
    statistics. A scheduler that drives an engine itself, without runners, reports when each
    request starts and ends executing with :meth:`execution_started` and :meth:`execution_ended`.
    """

    def __init__(
        self,
        *,
        model_name: str,
        version: int,
        model_dir: Path,
        config: ModelConfig,
        instances: Sequence[InstanceRunner],
        decoupled: bool,
        server: ServerHandle | None = None,
        statistics: ModelStatistics | None = None,
    ) -> None:
        self.model_name = model_name
        self.version = version
        self.model_dir = model_dir
        self.config = config
        self.instances = tuple(instances)
        self.decoupled = decoupled
        self.server = server
        self._statistics = statistics

    def execution_started(self, requests: Sequence[InferenceRequest], at_ns: int | None = None) -> int:
        """``requests`` start executing now (or started at ``at_ns``, ``time.monotonic_ns``, for a scheduler
        that reports an execution once it knows it succeeded); returns the start time to pass to
        :meth:`execution_ended`."""
        start = time.monotonic_ns() if at_ns is None else at_ns
        if self._statistics is not None:
            self._statistics.started(requests, start)
        trace_started(requests)
        return start

    def execution_ended(self, requests: Sequence[InferenceRequest], start_ns: int, *, computed: bool = True) -> None:
        """The execution of ``requests`` that started at ``start_ns`` is over (before or after their
        final responses; a request counts once both are in). Compute phases come from each request's
        :meth:`~naiad.inference.InferenceRequest.report_compute`. ``computed=False``: no backend
        computed them (an ensemble's steps did), so their traces get no compute timestamps, as Triton's."""
        end = time.monotonic_ns()
        if self._statistics is not None:
            self._statistics.executed(requests, start_ns, end)
        trace_executed(requests, start_ns, end, stamped=computed)
