"""One ensemble request: each step is submitted as soon as its inputs are ready, then the outputs answered.

Steps are ordinary requests on their models, submitted through the server's one entry point (so
they are validated, scheduled, counted and cancellable like any other) with a callback sink: the
next steps start on the thread that delivered the previous step's response, with no hop through
an event loop. Tensors move between steps by reference, renamed, never copied.

Each response of a decoupled step starts a *branch*: the steps downstream of that step run once
per response, on a copy of the tensors known at that point plus that response's outputs (load-time
checks guarantee nothing downstream also needs a tensor from another branch). A branch whose
tensors include every requested output answers the request: once, with the final flag, for a
non-decoupled ensemble; once per branch for a decoupled one, the last with the final flag when no
step is left in flight as it is made (as in Triton), else followed by a flag-only final.

As in Triton, a request runs only the steps its requested outputs depend on, its outputs come
in the order Triton's map of the ensemble's outputs walks them (:mod:`naiad.hash_order`), and
tensors gain or lose a batch dimension of 1 between batching and non-batching models
(:mod:`~naiad.ensemble.batch_dims`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from naiad.ensemble.batch_dims import fit_batch_dimension
from naiad.ensemble.graph import EnsembleGraph, Step
from naiad.errors import ErrorCode, NaiadError
from naiad.hash_order import map_order
from naiad.inference import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    ResponseEvent,
    Scheduling,
)
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.sinks import CallbackSink
from naiad.tensor import Tensor

if TYPE_CHECKING:
    from naiad.contexts import SchedulerContext
    from naiad.models import ModelSignature
    from naiad.server_handle import ServerHandle


@dataclass(frozen=True, slots=True)
class EnsemblePlan:
    """What every request of one ensemble version shares: its graph, and for each step the steps that
    read its outputs and all the steps downstream of it."""

    graph: EnsembleGraph
    decoupled: bool
    consumers_of: tuple[tuple[int, ...], ...]
    downstream: tuple[frozenset[int], ...]
    output_order: tuple[str, ...]  # the ensemble's outputs in the order its responses list them
    every_step: frozenset[int]
    batching: bool  # the ensemble's max_batch_size is not 0
    output_dims: dict[str, tuple[int, ...]]  # each output's shape without the batch dimension

    @classmethod
    def of(cls, graph: EnsembleGraph, decoupled: bool, config: ModelConfig) -> EnsemblePlan:
        consumers_of = tuple(
            tuple(sorted({c for tensor in step.produces for c in graph.consumers.get(tensor, ())}))
            for step in graph.steps
        )
        downstream = tuple(graph.downstream(step.index) for step in graph.steps)
        output_order = tuple(graph.outputs[index] for index in map_order(graph.outputs))
        output_dims = {
            output.name: tuple(output.reshape.shape if output.HasField("reshape") else output.dims)
            for output in config.output
        }
        return cls(
            graph,
            decoupled,
            consumers_of,
            downstream,
            output_order,
            frozenset(range(len(graph.steps))),
            config.max_batch_size > 0,
            output_dims,
        )

    def steps_for(self, outputs: tuple[str, ...]) -> frozenset[int]:
        """The steps a request for ``outputs`` runs: those the outputs depend on."""
        if len(outputs) == len(self.graph.outputs):
            return self.every_step
        return self.graph.upstream(outputs)


@dataclass(eq=False, slots=True)
class _Branch:
    """The ensemble tensors one line of responses has produced, and the steps it has yet to start.

    ``missing``: tensors a step answered without; as in Triton they count as known, so a step that
    takes one as an (optional) input runs without it and the answer leaves it out. ``batch_sizes``:
    the batch size of the request that made each tensor (0: its model does not batch).
    """

    tensors: dict[str, Tensor]
    pending: set[int]
    batch_sizes: dict[str, int]
    missing: set[str] = field(default_factory=set)
    answered: bool = False


@dataclass(eq=False, slots=True)
class _Call:
    """One step request in flight."""

    request: InferenceRequest | None = None
    done: bool = False
    batch_size: int = 0  # of the step's request; 0 when its model does not batch


@dataclass(eq=False)
class EnsembleRun:
    """Runs one ensemble request; ``on_idle`` is called once no step of it is in flight any more."""

    plan: EnsemblePlan
    server: ServerHandle
    request: InferenceRequest
    context: SchedulerContext  # reports the run as the request's execution, for the statistics
    on_idle: Callable[[], None]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0
    _calls: set[_Call] = field(default_factory=set)
    _done: bool = False  # the final flag was sent (or is being sent)
    _started_ns: int = 0
    _scheduling: Scheduling = field(default_factory=Scheduling)
    _absent: frozenset[str] = frozenset()  # optional ensemble inputs the request left out
    _wanted: tuple[str, ...] = ()  # the requested outputs, in the order of the answer
    _steps: frozenset[int] = frozenset()  # the steps those outputs need
    _root: _Branch | None = None
    _succeeded: bool = True  # no step failed and the request was not cancelled

    def start(self) -> None:
        request = self.request
        self._started_ns = time.monotonic_ns()
        # what every step inherits besides the custom parameters
        self._scheduling = Scheduling(request.correlation_id, request.flags, request.priority, request.timeout_us)
        self._absent = frozenset(name for name in self.plan.graph.inputs if name not in request.inputs)
        self._wanted = tuple(name for name in self.plan.output_order if name in request.requested_outputs)
        self._steps = self.plan.steps_for(self._wanted)
        batch_size = request.batch_size if self.plan.batching else 0
        branch = self._root = _Branch(dict(request.inputs), set(self._steps), dict.fromkeys(request.inputs, batch_size))
        request.cancellation.add_callback(self._cancelled)
        with self._lock:
            self._in_flight += 1  # held until the first steps are submitted
            ready = self._take_ready(branch, sorted(self._steps))
        self._submit_all(branch, ready)
        self._step_ended()

    # -- steps ---------------------------------------------------------------------------------

    def _take_ready(self, branch: _Branch, candidates: Iterable[int]) -> list[Step]:
        """Those of ``candidates`` the branch has yet to start whose inputs are all known, now counted
        in flight (lock held)."""
        if self._done:
            return []
        steps = self.plan.graph.steps
        tensors = branch.tensors
        absent = self._absent
        missing = branch.missing
        ready = []
        for index in candidates:
            step = steps[index]
            if index in branch.pending and all(t in tensors or t in absent or t in missing for t in step.consumes):
                branch.pending.discard(index)
                ready.append(step)
        self._in_flight += len(ready)
        return ready

    def _submit_all(self, branch: _Branch, steps: list[Step]) -> None:
        for step in steps:
            self._submit(branch, step)

    def _submit(self, branch: _Branch, step: Step) -> None:
        call = _Call()
        try:
            model = self.server.resolve(step.model_name, step.version)
            inputs = _step_inputs(branch, step, model.signature)
            if model.signature.max_batch_size > 0 and inputs:
                call.batch_size = int(inputs[0].data.shape[0]) if inputs[0].data.shape else 0
            decoupled = model.decoupled
            sink = CallbackSink(lambda event: self._step_event(branch, step, call, decoupled, event))
            request = self.server.submit(
                model,
                inputs,
                sink,
                outputs=list(step.output_map),
                request_id=self.request.id,
                parameters=self.request.parameters,
                scheduling=self._scheduling,
                parent=self.request,
            )
        except NaiadError as error:
            self._fail(error)
            self._step_ended()
            return
        with self._lock:
            if not call.done:
                call.request = request
                self._calls.add(call)

    def _step_event(self, branch: _Branch, step: Step, call: _Call, decoupled: bool, event: ResponseEvent) -> None:
        response = event.response
        if response is not None and response.error is not None:
            self._fail(response.error)
        elif response is not None and (response.outputs or not decoupled):
            names = step.output_map
            produced = {names[t.name]: _renamed(t, names[t.name]) for t in response.outputs if t.name in names}
            missing = {tensor for tensor in names.values() if tensor not in produced}
            consumers = self.plan.consumers_of[step.index]
            if decoupled:  # a branch of its own: the downstream steps run once per response
                with self._lock:
                    pending = set(self.plan.downstream[step.index] & self._steps)
                    child = _Branch(
                        {**branch.tensors, **produced},
                        pending,
                        {**branch.batch_sizes, **dict.fromkeys(produced, call.batch_size)},
                        branch.missing | missing,
                    )
                    ready = self._take_ready(child, consumers)
                self._branch_progressed(child, ready, closing=event.final)
            else:
                with self._lock:
                    branch.tensors.update(produced)
                    branch.batch_sizes.update(dict.fromkeys(produced, call.batch_size))
                    branch.missing |= missing
                    ready = self._take_ready(branch, consumers)
                self._branch_progressed(branch, ready, closing=event.final)
        if event.final:
            with self._lock:
                call.done = True
                call.request = None  # the step request holds this call through its sink: no cycle
                self._calls.discard(call)
            self._step_ended()

    def _branch_progressed(self, branch: _Branch, ready: list[Step], *, closing: bool) -> None:
        """Answer a decoupled ensemble's branch once it holds every requested output, then start the
        steps it made ready. ``closing``: the event that progressed it was its step's last. As in
        Triton, an answer made when that step was the last in flight carries the final flag (no
        flag-only response follows)."""
        if self.plan.decoupled and not branch.answered and self._complete(branch):
            branch.answered = True
            with self._lock:
                last = closing and not ready and self._in_flight == 1 and not self._done
                self._done = self._done or last
            self._send(self._response(branch), final=last)
        self._submit_all(branch, ready)

    def _step_ended(self) -> None:
        """One fewer step in flight; the last one answers the request (if nothing did) and frees the run."""
        with self._lock:
            self._in_flight -= 1
            if self._in_flight:
                return
            finishing = not self._done
            self._done = True
        if finishing:
            self._finish()
        self.request.cancellation.remove_callback(self._cancelled)
        self.on_idle()

    # -- answers -------------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.plan.decoupled:
            self._send(None, final=True)
            return
        # A non-decoupled ensemble has one branch; it is complete unless a step sent no outputs.
        branch = self._root
        if branch is not None and self._complete(branch):
            self._send(self._response(branch), final=True)
            return
        self._succeeded = False
        self._send(
            InferenceResponse(
                error=NaiadError(
                    f"in ensemble '{self.plan.graph.name}', unexpected deadlock, at least one output is not set "
                    "while no more ensemble steps can be made",
                    ErrorCode.INVALID_ARG,
                )
            ),
            final=True,
        )

    def _fail(self, error: NaiadError) -> None:
        """Answer the error now (once); steps still in flight are cancelled and their answers dropped."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._succeeded = False
            calls = [call.request for call in self._calls if call.request is not None]
        for request in calls:
            request.cancel()
        message = f"in ensemble '{self.plan.graph.name}', {error.message}"
        self._send(InferenceResponse(error=NaiadError(message, error.code)), final=True)

    def _cancelled(self) -> None:
        self._fail(NaiadError("Request was cancelled", ErrorCode.CANCELLED))

    def _send(self, response: InferenceResponse | None, *, final: bool) -> None:
        if final and self._succeeded:  # as in Triton, a failed ensemble request counts no execution
            start = self.context.execution_started((self.request,), at_ns=self._started_ns)
            self.context.execution_ended((self.request,), start, computed=False)
        self.request.sender.send(response, final=final)

    def _complete(self, branch: _Branch) -> bool:
        return all(name in branch.tensors or name in branch.missing for name in self._wanted)

    def _response(self, branch: _Branch) -> InferenceResponse:
        request = self.request
        plan = self.plan
        outputs = [
            _batch_fitted(branch.tensors[name], plan.output_dims[name], plan.batching, branch.batch_sizes[name])
            for name in self._wanted
            if name in branch.tensors
        ]
        # Triton's ensembles answer with the request's sequence settings as response parameters.
        parameters: dict[str, ParameterValue] = {
            "sequence_id": request.correlation_id,
            "sequence_start": bool(request.flags & SEQUENCE_START),
            "sequence_end": bool(request.flags & SEQUENCE_END),
        }
        return InferenceResponse(outputs, parameters=parameters)


def _step_inputs(branch: _Branch, step: Step, signature: ModelSignature) -> list[Tensor]:
    """The branch's tensors a step takes, under the step's names, with their batch dimension fitted."""
    batching = signature.max_batch_size > 0
    inputs = []
    for name, tensor_name in step.input_map:
        tensor = branch.tensors.get(tensor_name)
        if tensor is None:
            continue
        spec = signature.inputs.get(name)
        if spec is not None:
            tensor = _batch_fitted(tensor, spec.dims, batching, branch.batch_sizes[tensor_name])
        inputs.append(_renamed(tensor, name))
    return inputs


def _batch_fitted(tensor: Tensor, dims: tuple[int, ...], batching: bool, batch_size: int) -> Tensor:
    data = fit_batch_dimension(tensor.data, dims, batching, batch_size)
    if data is tensor.data:
        return tensor
    return Tensor(tensor.name, tensor.datatype, data, tensor.memory, tensor.device_id)


def _renamed(tensor: Tensor, name: str) -> Tensor:
    """The same data under another name (no copy)."""
    return Tensor(name, tensor.datatype, tensor.data, tensor.memory, tensor.device_id)
