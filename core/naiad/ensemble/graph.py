"""An ensemble's steps as a data-flow graph, checked as Triton checks it before any model loads.

Every check raises INVALID_ARG with Triton's text, so a broken ensemble reports what Triton would; an
ensemble input or output that no step maps is a :class:`~naiad.suggestions.SuggestingError` with the
mapped tensor names close to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from naiad.errors import invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.suggestions import SuggestingError, close_matches


@dataclass(frozen=True, slots=True)
class Step:
    """One step: the model it runs and how its tensors map to the ensemble's."""

    index: int
    model_name: str
    model_version: int  # -1: the latest READY version
    input_map: tuple[tuple[str, str], ...]  # (model input, ensemble tensor)
    output_map: dict[str, str]  # model output -> ensemble tensor
    consumes: frozenset[str]  # the ensemble tensors it reads
    produces: frozenset[str]  # the ensemble tensors it writes

    @property
    def version(self) -> str | int:
        """The version to ask for: "" (the latest) or a number."""
        return self.model_version if self.model_version > 0 else ""


@dataclass(frozen=True, slots=True)
class EnsembleGraph:
    """The checked steps of one ensemble, with who consumes each tensor."""

    name: str
    steps: tuple[Step, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    consumers: dict[str, tuple[int, ...]]  # ensemble tensor -> the steps that take it

    @classmethod
    def of(cls, config: ModelConfig) -> EnsembleGraph:
        """The graph of ``config``'s ``ensemble_scheduling``; raises Triton's INVALID_ARG if it is broken."""
        steps = _steps(config)
        inputs = tuple(tensor.name for tensor in config.input)
        outputs = tuple(tensor.name for tensor in config.output)
        _check_flow(config.name, steps, inputs, outputs)
        consumers: dict[str, list[int]] = {}
        for step in steps:
            for tensor in step.consumes:
                consumers.setdefault(tensor, []).append(step.index)
        return cls(config.name, steps, inputs, outputs, {k: tuple(v) for k, v in consumers.items()})

    def downstream(self, index: int) -> frozenset[int]:
        """The steps that depend, directly or not, on step ``index``'s outputs."""
        found: set[int] = set()
        waiting = deque(self.steps[index].produces)
        while waiting:
            for consumer in self.consumers.get(waiting.popleft(), ()):
                if consumer not in found:
                    found.add(consumer)
                    waiting.extend(self.steps[consumer].produces)
        return frozenset(found)

    def upstream(self, tensors: Iterable[str]) -> frozenset[int]:
        """The steps that ``tensors`` depend on, directly or not."""
        producer = {tensor: step.index for step in self.steps for tensor in step.produces}
        found: set[int] = set()
        waiting = deque(tensors)
        while waiting:
            index = producer.get(waiting.popleft())
            if index is not None and index not in found:
                found.add(index)
                waiting.extend(self.steps[index].consumes)
        return frozenset(found)


def _steps(config: ModelConfig) -> tuple[Step, ...]:
    name = config.name
    if not config.ensemble_scheduling.step:
        raise invalid_arg(f"must specify 'step' for ensemble '{name}'")
    steps: list[Step] = []
    produced: set[str] = set()
    for index, step in enumerate(config.ensemble_scheduling.step):
        for field, present in (
            ("model_name", bool(step.model_name)),
            ("input_map", bool(step.input_map)),
            ("output_map", bool(step.output_map)),
        ):
            if not present:
                raise invalid_arg(f"must specify '{field}' in step {index} of ensemble '{name}'")
        for tensor in step.output_map.values():
            if tensor in produced:
                raise invalid_arg(
                    f"ensemble tensor '{tensor}' can appear in an output map only once for ensemble '{name}' "
                    f"step {index}"
                )
            produced.add(tensor)
        steps.append(
            Step(
                index,
                step.model_name,
                step.model_version,
                tuple(sorted(step.input_map.items())),
                dict(sorted(step.output_map.items())),
                frozenset(step.input_map.values()),
                frozenset(step.output_map.values()),
            )
        )
    return tuple(steps)


def _check_flow(name: str, steps: tuple[Step, ...], inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
    """Every input is used, every output written, every tensor consumed (Triton's data-flow check)."""
    known = {tensor for step in steps for tensor in step.consumes | step.produces}
    for tensor in inputs:
        if tensor not in known:
            raise SuggestingError(
                f"ensemble input '{tensor}' for ensemble {name}' is not used",
                name=tensor,
                suggestions=close_matches(tensor, known),
            )
    ready = set(inputs)
    remaining = list(steps)
    progress = True
    while progress:  # a step runs once all it consumes is ready
        progress = False
        for step in list(remaining):
            if step.consumes <= ready:
                ready |= step.produces
                remaining.remove(step)
                progress = True
    producers = {tensor: step for step in steps for tensor in step.produces}
    for tensor in outputs:
        if tensor not in known:
            raise SuggestingError(
                f"ensemble output '{tensor}' for ensemble {name}' is not used",
                name=tensor,
                suggestions=close_matches(tensor, known),
            )
        if tensor not in ready:
            message = f"output '{tensor}' for ensemble '{name}' is not written"
            source = _unconnected_source(tensor, producers, ready)
            if source != tensor:
                message += f": at least one of its depending tensors, '{source}', is not connected"
            raise invalid_arg(message)
    consumed = {tensor for step in steps for tensor in step.consumes}
    for tensor in sorted(known):
        if tensor in outputs:
            continue
        if tensor not in ready or tensor not in consumed:
            raise invalid_arg(f"ensemble tensor '{tensor}' is unused in ensemble '{name}'")


def _unconnected_source(tensor: str, producers: dict[str, Step], ready: set[str]) -> str:
    """Follow not-ready tensors upstream to the first one nothing produces."""
    seen = {tensor}
    current = tensor
    while current in producers:
        upstream = next((t for t in sorted(producers[current].consumes) if t not in ready and t not in seen), None)
        if upstream is None:
            break
        seen.add(upstream)
        current = upstream
    return current
