"""Triton's sequence batcher for stateful models (``sequence_batching`` in config.pbtxt).

Requests carry a correlation id and START/END flags. Each sequence is pinned to one batch
slot of one instance for its lifetime; the ``direct`` strategy batches one request per
slot (padding idle slots), ``oldest`` dynamically batches the oldest ready sequences. The
scheduler adds the configured control tensors and implicit state to every request, so
backends see them as ordinary inputs. Decisions live in :mod:`sequence_table` and
:mod:`sequence_slots` (clock injected, no threads); this module owns the threads.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from naiad.contexts import SchedulerContext
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import SEQUENCE_END, SEQUENCE_START, InferenceRequest, ResponseEvent, ResponseSender
from naiad.pipeline import ResponseStage
from naiad.scheduling.base import Scheduler
from naiad.scheduling.batch_former import Batch, BatchingRules, Clock
from naiad.scheduling.execution import InstanceRunner, answer
from naiad.scheduling.ordering import OrderedRelease
from naiad.scheduling.sequence_controls import CorrelationId, SequenceControls, controls_from_config
from naiad.scheduling.sequence_slots import DirectSlots, OldestSlots, SlotBatch
from naiad.scheduling.sequence_state import ImplicitState, states_from_config
from naiad.scheduling.sequence_table import Entry, SequenceTable, SlotKey, backlog_timeout_error
from naiad.scheduling.start_hold import POLL_S, StartHold
from naiad.scheduling.workers import WorkerThreads, seconds_until, unloading_error
from naiad.tensor import Tensor

logger = logging.getLogger(__name__)

DEFAULT_IDLE_US = 1_000_000


class SequenceScheduler(Scheduler):
    """Worker threads, one per instance, plus a keeper thread that ends idle sequences."""

    def __init__(self, context: SchedulerContext, *, clock: Clock = time.monotonic_ns) -> None:
        config = context.config
        batching = config.sequence_batching
        self._name = config.name
        self._runners = context.instances
        self._clock = clock
        self._controls: SequenceControls = controls_from_config(config)
        self._generated_names = frozenset(  # the inputs the batcher adds to a request
            [control.name for control in batching.control_input] + [state.input_name for state in batching.state]
        )
        self._state = ImplicitState(states_from_config(config, context.model_dir))
        self._oldest = batching.HasField("oldest")
        self._iterative = batching.iterative_sequence
        self._generated_ids = itertools.count(1)  # an iterative model's ids for requests that bring none
        slots = max(config.max_batch_size, 1)
        if self._oldest and batching.oldest.max_candidate_sequences > 0:
            slots = batching.oldest.max_candidate_sequences
        idle_us = batching.max_sequence_idle_microseconds or DEFAULT_IDLE_US
        self._table = SequenceTable(config.name, len(self._runners), slots, idle_us, clock)
        ragged = frozenset(tensor.name for tensor in config.input if tensor.allow_ragged_batch)
        self._ordering = OrderedRelease() if self._oldest and batching.oldest.preserve_ordering else None
        self._batchers: list[DirectSlots | OldestSlots]
        if self._oldest:
            rules = BatchingRules(
                max_batch_size=config.max_batch_size,
                preferred_batch_sizes=tuple(batching.oldest.preferred_batch_size),
                max_queue_delay_us=batching.oldest.max_queue_delay_microseconds,
                ragged_inputs=ragged,
            )
            self._batchers = [
                OldestSlots(index, slots, self._table, clock, rules, self._prepare)
                for index in range(len(self._runners))
            ]
        else:
            self._batchers = [
                DirectSlots(
                    index,
                    slots,
                    self._table,
                    clock,
                    max_batch_size=config.max_batch_size,
                    max_queue_delay_us=batching.direct.max_queue_delay_microseconds,
                    minimum_slot_utilization=batching.direct.minimum_slot_utilization,
                    ragged_inputs=ragged,
                )
                for index in range(len(self._runners))
            ]
        # Triton's TRITONSERVER_DELAY_SCHEDULER test hook: per instance for ``oldest`` (each has a batcher
        # of its own in Triton), one for all instances (and the backlog) for ``direct``.
        self._holds = (
            [StartHold(self._name) for _ in self._batchers]
            if self._oldest
            else [StartHold(self._name, with_backlog=True)]
        )
        lock = threading.Lock()
        self._condition = threading.Condition(lock)  # workers: new work or a slot freed
        self._keeper = threading.Condition(lock)  # keeper: a timer may now be due sooner
        self._keeper_wakeup: int | None = None  # what the keeper sleeps until (None: no timer)
        self._threads = WorkerThreads()
        self._accepting = False
        self._stopping = False
        self.batch_sizes: Counter[int] = Counter()  # executed batches by row count (padding included)

    # -- Scheduler -------------------------------------------------------------------------------

    def stages(self) -> Sequence[ResponseStage]:
        stages: list[ResponseStage] = []
        if self._state:
            stages.append(self._state)
        if self._ordering is not None:
            stages.append(self._ordering)
        return stages

    def start(self) -> None:
        self._accepting = True
        for index, runner in enumerate(self._runners):
            self._threads.spawn(f"naiad-{runner.name}", self._work, index, runner)
        self._threads.spawn(f"naiad-{self._name}-sequences", self._keep)

    def submit(self, request: InferenceRequest) -> None:
        with self._condition:
            if not self._accepting:
                raise unloading_error(self._name)
            if self._iterative and request.correlation_id in (0, ""):  # Triton's iterative sequencer
                request.correlation_id = next(self._generated_ids)
                request.flags = SEQUENCE_START
            self._table.check(request)
            self._controls.check_id(request.correlation_id)
            if request.flags & SEQUENCE_START and self._table.active(request.correlation_id):
                logger.warning(
                    "sequence %s for model '%s' has a conflict. The previous sequence did not end before this "
                    "sequence start. Previous sequence will be terminated early.",
                    request.correlation_id,
                    self._name,
                )
            self._admit(request)
            self._condition.notify_all()
            # Idle deadlines only move later as requests arrive; wake the keeper only for a first
            # timer or a request timeout (backlog expiry), which may be due sooner.
            if self._keeper_wakeup is None or request.timeout_us:
                self._keeper.notify()

    def _admit(self, request: InferenceRequest) -> None:
        """Queue a checked request on its sequence's slot, or in the backlog (lock held)."""
        placed = self._table.admit(request)
        if placed is None:
            logger.debug("model '%s': sequence %s waits in the backlog", self._name, request.correlation_id)
            return
        slot, entry = placed
        logger.debug(
            "model '%s': sequence %s queued on %s slot %d",
            self._name,
            request.correlation_id,
            self._runners[slot.instance].name,
            slot.slot,
        )
        self._batchers[slot.instance].enqueue(slot.slot, request.correlation_id, entry)

    def _iterated(self, requests: Sequence[InferenceRequest]) -> None:
        """After an iterative model's execution: requests it rescheduled run again in their sequence
        (without START); the others' sequences end, as Triton ends them (lock held)."""
        for request in requests:
            if request.correlation_id in (0, ""):  # a padding request
                continue
            if request.rescheduled and request.is_cancelled():
                answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
            if request.rescheduled and not request.sender.closed:
                request.rescheduled = False
                request.flags = 0
                try:  # its sequence may have idled out while the model held it: Triton's START error
                    self._table.check(request)
                except NaiadError as error:
                    answer(request, error)
                    continue
                self._admit(request)
            elif not request.flags & SEQUENCE_END:
                slot = self._table.forget(request.correlation_id)
                if slot is not None:
                    self._free_slot(request.correlation_id, slot)

    def _free_slot(self, correlation_id: CorrelationId, slot: SlotKey) -> None:
        """End the slot of a sequence the table forgot (idle, or an iterative one done) once what is
        queued for it has run (lock held)."""
        self._batchers[slot.instance].enqueue(slot.slot, correlation_id, Entry(None, self._clock()))

    def stop(self) -> None:
        with self._condition:
            self._accepting = False
            self._stopping = True
            self._condition.notify_all()
            self._keeper.notify()
        self._threads.join()
        leftover = [entry.request for backlog in self._table.backlogs for entry in backlog.entries]
        self._table.backlogs.clear()
        for request in leftover:
            if request is not None:
                answer(request, NaiadError(f"model '{self._name}' stopped", ErrorCode.UNAVAILABLE))

    # -- threads ---------------------------------------------------------------------------------

    def _work(self, index: int, runner: InstanceRunner) -> None:
        batcher = self._batchers[index]
        while True:
            with self._condition:
                batch = self._next_batch(batcher, runner)
                if batch is None:
                    runner.end_turn()
                    return
                requests = self._materialize(batch)
                self._record(batch, requests, runner.name, batcher)
            runner.execute(requests, keep_turn=True, reschedules=self._iterative)
            with self._condition:
                if isinstance(batcher, OldestSlots):
                    batcher.complete_all(requests)
                if self._iterative:
                    self._iterated(requests)
                self._condition.notify_all()
            del batch, requests  # a finished batch's tensors must not wait here for the next one

    def _next_batch(self, batcher: DirectSlots | OldestSlots, runner: InstanceRunner) -> SlotBatch | Batch | None:
        while True:
            if self._held(batcher):
                runner.end_turn()
                self._condition.wait(POLL_S)
                continue
            batch = batcher.next_batch(flush=self._stopping)
            for request in batcher.take_cancelled():
                answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
            if batch is not None:
                return batch
            if self._stopping and batcher.idle():
                return None
            runner.end_turn()
            self._condition.wait(self._wait_seconds(batcher.next_wakeup_ns()))

    def _held(self, batcher: DirectSlots | OldestSlots) -> bool:
        """Whether Triton's start hold keeps ``batcher`` waiting (lock held)."""
        if isinstance(batcher, OldestSlots):
            hold = self._holds[batcher.instance]
            return bool(hold.queued) and not self._stopping and hold.holding(len(batcher.former))
        hold = self._holds[0]
        if not hold.queued or self._stopping:
            return False
        queued = sum(len(queue) for slots in self._batchers for queue in slots.queues)
        return hold.holding(queued, sum(len(backlog.entries) for backlog in self._table.backlogs))

    def _keep(self) -> None:
        """End idle sequences and time out backlogged ones, on time."""
        with self._condition:
            while not self._stopping:
                for correlation_id, slot in self._table.reap():
                    logger.debug(
                        "model '%s': sequence %s idle for too long; freeing %s slot %d",
                        self._name,
                        correlation_id,
                        self._runners[slot.instance].name,
                        slot.slot,
                    )
                    self._free_slot(correlation_id, slot)
                    self._condition.notify_all()
                for request in self._table.expire_backlogs():
                    answer(request, backlog_timeout_error())
                self._keeper_wakeup = self._table.next_wakeup_ns()
                self._keeper.wait(self._wait_seconds(self._keeper_wakeup))

    def _wait_seconds(self, wakeup: int | None) -> float | None:
        return seconds_until(wakeup, self._clock())

    # -- requests --------------------------------------------------------------------------------

    def _prepare(self, slot: SlotKey, request: InferenceRequest) -> None:
        """Add control tensors and implicit state to a request about to be batched."""
        if self._ordering is not None and request.sender.place < 0:  # a rescheduled request keeps its place
            self._ordering.register(request.sender)
        client_inputs = [name for name in request.inputs if name not in self._generated_names]
        generated = self._controls.tensors(request.flags, request.correlation_id, client_inputs)
        if self._state:
            generated = self._state.inputs_for(slot, request) + generated
        request.inputs = _with_inputs(generated, request.inputs)

    def _materialize(self, batch: SlotBatch | Batch) -> list[InferenceRequest]:
        """The requests to execute; for a direct batch, padding slots become null requests."""
        if isinstance(batch, Batch):
            return batch.requests
        padding = [self._null_request(batch.template) for _, request in batch.entries if request is None]
        requests: list[InferenceRequest] = []
        for slot, request in batch.entries:
            if request is None:
                requests.append(padding.pop())
            else:
                self._prepare(SlotKey(batch.instance, slot), request)
                requests.append(request)
        return requests

    def _null_request(self, template: InferenceRequest) -> InferenceRequest:
        """A padding request shaped like ``template``: zero inputs, READY false, answers dropped."""
        zeros = {name: _zeros_like(tensor) for name, tensor in template.inputs.items()}
        generated = self._controls.tensors(0, 0, list(zeros), ready=False)
        if self._state:
            generated = self._state.null_inputs() + generated
        return InferenceRequest(
            model_name=template.model_name,
            model_version=template.model_version,
            inputs=_with_inputs(generated, zeros),
            requested_outputs={},
            sender=ResponseSender(_discard),
        )

    def _record(
        self,
        batch: SlotBatch | Batch,
        requests: list[InferenceRequest],
        instance_name: str,
        batcher: DirectSlots | OldestSlots,
    ) -> None:
        rows = sum(request.batch_size for request in requests)
        self.batch_sizes[rows] += 1
        padding = 0
        slots: list[int] = []
        if isinstance(batch, SlotBatch):
            slots = [slot for slot, _ in batch.entries]
            padding = sum(1 for _, request in batch.entries if request is None)
        elif isinstance(batcher, OldestSlots):
            slots = sorted(batcher.slot_of(request) for request in requests)
        logger.debug(
            "model '%s': executing a sequence batch of %d rows (%d requests, %d padding) on %s, slots %s: %s",
            self._name,
            rows,
            len(requests) - padding,
            padding,
            instance_name,
            slots,
            batch.reason.value,
        )


def _with_inputs(generated: list[Tensor], inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """Generated tensors first (as Triton's python backend lists them), overriding same-named inputs."""
    merged = {tensor.name: tensor for tensor in generated}
    for name, tensor in inputs.items():
        merged.setdefault(name, tensor)
    return merged


def _zeros_like(tensor: Tensor) -> Tensor:
    if tensor.datatype == "BYTES":
        return Tensor(tensor.name, tensor.datatype, np.full(tensor.data.shape, b"", dtype=np.object_))
    return Tensor(tensor.name, tensor.datatype, np.zeros_like(tensor.data))


def _discard(event: ResponseEvent) -> None:
    """Where a padding request's responses go."""
