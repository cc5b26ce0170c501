"""The built-in backend behind ``platform: "ensemble"``: no instances, a scheduler that runs the steps.

Loading an ensemble checks its steps (:mod:`~naiad.ensemble.graph`), then checks them against the
composing models, which the lifecycle loads first (:mod:`~naiad.ensemble.composition`), and marks
the ensemble decoupled when a step upstream of its outputs is. Each request then runs as an
:class:`~naiad.ensemble.run.EnsembleRun`; the ensemble is ready while every composing model is.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from naiad.backend_model import BackendModel
from naiad.config.validate import ConfigInvalid, decoupled_cache_problem
from naiad.contexts import ModelLoadContext, SchedulerContext
from naiad.ensemble.composition import check_composition
from naiad.ensemble.graph import EnsembleGraph
from naiad.ensemble.run import EnsemblePlan, EnsembleRun
from naiad.errors import NaiadError
from naiad.hookspecs import hookimpl
from naiad.inference import InferenceRequest
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling.base import Scheduler
from naiad.scheduling.workers import unloading_error

if TYPE_CHECKING:
    from naiad.server_handle import ServerHandle


class EnsembleModel(BackendModel):
    """A loaded ensemble version: its checked plan."""

    def __init__(self, plan: EnsemblePlan) -> None:
        self.plan = plan


class EnsembleScheduler(Scheduler):
    """Starts an :class:`EnsembleRun` per request; ``stop`` waits for the runs in progress."""

    def __init__(self, plan: EnsemblePlan, server: ServerHandle, context: SchedulerContext) -> None:
        self._plan = plan
        self._server = server
        self._context = context
        self._idle = threading.Condition()
        self._running = 0
        self._stopping = False

    def start(self) -> None:
        """Nothing to start: steps run on their own models' schedulers."""

    def submit(self, request: InferenceRequest) -> None:
        with self._idle:
            if self._stopping:
                raise unloading_error(self._plan.graph.name)
            self._running += 1
        EnsembleRun(self._plan, self._server, request, self._context, self._run_ended).start()

    def stop(self) -> None:
        with self._idle:
            self._stopping = True
            self._idle.wait_for(lambda: self._running == 0)

    def ready(self) -> bool:
        """Every composing model has a READY version."""
        return all(self._server.model_ready(step.model_name, step.version) for step in self._plan.graph.steps)

    def _run_ended(self) -> None:
        with self._idle:
            self._running -= 1
            if not self._running:
                self._idle.notify_all()


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> EnsembleModel:
    config = context.config
    server = context.server
    if server is None:
        raise NaiadError(f"ensemble '{config.name}' needs a server to run its steps on")
    cached_decoupled = decoupled_cache_problem(config)  # as written: the steps decide what it is next
    if cached_decoupled:
        raise ConfigInvalid(config.name, [cached_decoupled])
    graph = EnsembleGraph.of(config)

    def config_of(name: str, version: int) -> ModelConfig:
        return server.resolve(name, version if version > 0 else "").config

    decoupled = check_composition(config, graph, config_of, server.load_failure, server.model_names())
    config.model_transaction_policy.decoupled = decoupled
    return EnsembleModel(EnsemblePlan.of(graph, decoupled, config))


@hookimpl
def naiad_create_scheduler(model: BackendModel, context: SchedulerContext) -> Scheduler | None:
    if not isinstance(model, EnsembleModel):
        return None
    assert context.server is not None  # checked at load
    return EnsembleScheduler(model.plan, context.server, context)
