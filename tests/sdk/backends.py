"""Small backends written against the SDK (``naiad.backend``) alone, registered in-process by the tests.

* :class:`StepperBackend`: an LLM-shaped engine. It brings its own scheduler: a loop on the server's
  event loop that emits one token per running sequence per step and lets new sequences join between
  steps (iteration-level batching). It claims the platform ``stepper_v1`` and the file ``model.step``.
* :class:`AsyncEchoBackend`: ``async def execute`` and ``async def is_ready`` on the server loop; counts
  requests in a custom metric; records its initialize/finalize and the instance contexts it saw.
* :class:`SlowReadyBackend`: a sync ``is_ready`` that takes a second.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from naiad.backend import (
    BackendContext,
    BackendInfo,
    BackendModel,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    MetricFamily,
    ModelConfig,
    ModelFormat,
    ModelInstance,
    ModelLoadContext,
    NaiadError,
    Scheduler,
    SchedulerContext,
    Tensor,
    hookimpl,
    unavailable,
)

STEP_SECONDS = 0.01


# -- stepper: a backend-supplied scheduler -------------------------------------------------------------


@dataclass(eq=False)
class _Sequence:
    request: InferenceRequest
    length: int
    started_ns: int = 0
    emitted: int = 0


class StepScheduler(Scheduler):
    """Continuous batching: every step, each running sequence gets its next token; arrivals join at once."""

    def __init__(self, context: SchedulerContext) -> None:
        assert context.server is not None
        self._context = context
        self._loop = context.server.loop
        self._lock = threading.Lock()
        self._arrived: list[InferenceRequest] = []
        self._accepting = False
        self._stopping = False
        self._wake = asyncio.Event()
        self._engine: concurrent.futures.Future[None] | None = None
        self.step_sizes: list[int] = []

    def start(self) -> None:
        self._accepting = True
        self._engine = asyncio.run_coroutine_threadsafe(self._run(), self._loop)

    def submit(self, request: InferenceRequest) -> None:
        with self._lock:
            if not self._accepting:
                raise unavailable(f"model '{self._context.model_name}' is stopping")
            self._arrived.append(request)
        self._loop.call_soon_threadsafe(self._wake.set)

    def stop(self) -> None:
        with self._lock:
            self._accepting = False
            self._stopping = True
        self._loop.call_soon_threadsafe(self._wake.set)
        assert self._engine is not None
        self._engine.result(10)

    async def _run(self) -> None:
        running: list[_Sequence] = []
        while True:
            with self._lock:
                arrived, self._arrived = self._arrived, []
                stopping = self._stopping
            for request in arrived:
                length = int(request.inputs["LENGTH"].numpy().reshape(-1)[0])
                sequence = _Sequence(request, length)
                sequence.started_ns = self._context.execution_started([request])
                running.append(sequence)
            if not running:
                if stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            self.step_sizes.append(len(running))
            for sequence in list(running):
                request = sequence.request
                if request.is_cancelled():
                    request.sender.send(
                        InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED)), final=True
                    )
                else:
                    token = Tensor("TOKEN", "INT32", np.array([sequence.emitted], dtype=np.int32))
                    sequence.emitted += 1
                    done = sequence.emitted >= sequence.length
                    response = InferenceResponse([token], parameters={"batch": len(running)})
                    request.sender.send(response, final=done)
                    if not done:
                        continue
                running.remove(sequence)
                self._context.execution_ended([request], sequence.started_ns)
            await asyncio.sleep(STEP_SECONDS)


class StepperBackend:
    """The hooks of the ``stepper`` backend."""

    def __init__(self) -> None:
        self.schedulers: list[StepScheduler] = []

    @hookimpl
    def naiad_backend_info(self) -> BackendInfo:
        return BackendInfo("stepper", (ModelFormat("model.step", ("stepper_v1",)),), default_instance_kind="CPU")

    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        return BackendModel()

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        return ModelInstance()  # the scheduler drives the engine; instances are not executed

    @hookimpl
    def naiad_create_scheduler(self, model: BackendModel, context: SchedulerContext) -> Scheduler:
        scheduler = StepScheduler(context)
        self.schedulers.append(scheduler)
        return scheduler


STEPPER_CONFIG = """
platform: "stepper_v1"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "LENGTH" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TOKEN" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


# -- asyncecho: async instances, a custom metric, the backend lifecycle -------------------------------------


class AsyncEchoModel(BackendModel):
    def __init__(self, backend: AsyncEchoBackend) -> None:
        self.backend = backend
        self.final_config: ModelConfig | None = None

    def configured(self, config: ModelConfig) -> None:
        self.final_config = config


class AsyncEchoInstance(ModelInstance):
    """Echoes ``IN`` as ``OUT`` after an ``await``, on the server's loop."""

    def __init__(self, backend: AsyncEchoBackend) -> None:
        self._backend = backend

    async def execute(self, requests: Sequence[InferenceRequest]) -> None:
        self._backend.execute_threads.add(threading.get_ident())
        self._backend.requests.metric().increment(len(requests))
        await asyncio.sleep(0.001)
        for request in requests:
            data = request.inputs["IN"].numpy()
            request.sender.send(InferenceResponse([Tensor("OUT", "FP32", data)]), final=True)

    async def is_ready(self) -> bool:
        await asyncio.sleep(0)
        return self._backend.ready


@dataclass(eq=False)
class AsyncEchoBackend:
    """The hooks of the ``asyncecho`` backend, and what it saw."""

    ready: bool = True
    events: list[str] = field(default_factory=list)
    contexts: list[InstanceContext] = field(default_factory=list)
    execute_threads: set[int] = field(default_factory=set)
    backend_config: dict[str, str] = field(default_factory=dict)
    _requests: MetricFamily | None = None

    @property
    def requests(self) -> MetricFamily:
        assert self._requests is not None
        return self._requests

    @hookimpl
    def naiad_backend_initialize(self, context: BackendContext) -> None:
        self.events.append("initialize")
        self.backend_config = dict(context.backend_config)
        self._requests = context.server.metrics.family("asyncecho_requests", "Requests executed", "counter")

    @hookimpl
    def naiad_backend_finalize(self) -> None:
        self.events.append("finalize")
        self.requests.close()

    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        self.events.append(f"load {context.model_name}")
        return AsyncEchoModel(self)

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        self.contexts.append(context)
        return AsyncEchoInstance(self)


ECHO_CONFIG = """
backend: "asyncecho"
max_batch_size: 8
dynamic_batching {{ }}
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ name: "first" count: 2 kind: KIND_CPU }}, {{ name: "second" count: 1 kind: KIND_CPU }} ]
{extra}
"""


# -- spaced: responses sent one by one, a millisecond apart ------------------------------------------------------


class SpacedInstance(ModelInstance):
    """Answers each request of a batch in turn, a millisecond apart (as a loop over requests does)."""

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            request.sender.send(InferenceResponse([Tensor("OUT", "FP32", request.inputs["IN"].numpy())]), final=True)
            time.sleep(0.001)


class SpacedBackend:
    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        return BackendModel()

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        return SpacedInstance()


SPACED_CONFIG = """
backend: "spaced"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 2000000 }
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


# -- slowready: a blocking readiness check ---------------------------------------------------------------------


class SlowReadyInstance(ModelInstance):
    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            request.sender.send(InferenceResponse([Tensor("OUT", "FP32", request.inputs["IN"].numpy())]), final=True)

    def is_ready(self) -> bool:
        time.sleep(1.0)
        return True


class SlowReadyBackend:
    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        return BackendModel()

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        return SlowReadyInstance()


SLOW_CONFIG = """
backend: "slowready"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

IDENTITY_CONFIG = """
backend: "identity"
max_batch_size: 8
dynamic_batching {{ }}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
{extra}
"""
