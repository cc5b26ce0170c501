"""Implicit state (``sequence_batching.state``), kept by the scheduler for any backend.

Before a request executes, each state's input tensor is added to it: the initial state on
a sequence's START, else what the previous request of the sequence produced. The state
output is requested from the backend, captured from the response, and removed from what
the client sees unless the client asked for it. Backends need not do anything.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import invalid_arg
from naiad.inference import (
    SEQUENCE_START,
    Deliver,
    InferenceRequest,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
)
from naiad.protocol.model_config_pb2 import ModelConfig, ModelSequenceBatching
from naiad.tensor import Tensor

INITIAL_STATE_FOLDER = "initial_state"


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One implicit state: its tensor names and the value a sequence starts from."""

    input_name: str
    output_name: str
    datatype: datatypes.DataType
    initial: npt.NDArray[Any]  # with the batch dimension when the model batches

    def initial_tensor(self) -> Tensor:
        return Tensor(self.input_name, self.datatype.wire, self.initial.copy())


def states_from_config(config: ModelConfig, model_dir: Path | None = None) -> list[StateSpec]:
    """The states of a config, with Triton's checks (and texts) on ``initial_state``."""
    batching = config.max_batch_size > 0
    return [_spec(state, batching, model_dir) for state in config.sequence_batching.state]


def _spec(state: ModelSequenceBatching.State, batching: bool, model_dir: Path | None) -> StateSpec:
    datatype = datatypes.BY_NUMBER[state.data_type]
    batch = [1] if batching else []
    if len(state.initial_state) > 1:
        raise invalid_arg(
            f"initial_state field for state input '{state.input_name}' must contain exactly one or zero "
            f"element. Found '{len(state.initial_state)}' elements."
        )
    if not state.initial_state:
        shape = tuple(batch + [1 if dim == -1 else dim for dim in state.dims])
        return StateSpec(state.input_name, state.output_name, datatype, datatypes.zeros(datatype, shape))
    initial = state.initial_state[0]
    _check_initial(state, initial)
    shape = tuple(batch + list(initial.dims))
    if initial.WhichOneof("state_data") == "zero_data":
        data = datatypes.zeros(datatype, shape)
    elif initial.WhichOneof("state_data") == "data_file":
        data = _from_file(state, initial.data_file, datatype, shape, model_dir)
    else:
        raise invalid_arg(f"initial_state setting expects state'{state.input_name}' to have state_data set")
    return StateSpec(state.input_name, state.output_name, datatype, data)


def _check_initial(state: ModelSequenceBatching.State, initial: ModelSequenceBatching.InitialState) -> None:
    name = state.input_name
    if initial.data_type != state.data_type:
        raise invalid_arg(
            f"The data type used for 'initial_state' field of state '{name}' does not match the state data type."
        )
    if not initial.name:
        raise invalid_arg(f"Field 'name' must be set when using initial_state for state input '{name}'.")
    if len(initial.dims) != len(state.dims):
        raise invalid_arg(
            "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state "
            f"input '{name}'. {len(initial.dims)} != {len(state.dims)}"
        )
    for given, declared in zip(initial.dims, state.dims, strict=True):
        if given == -1:
            raise invalid_arg(f"'initial_state' field for state input name '{name}' contains variable dimensions.")
        if declared != -1 and given != declared:
            raise invalid_arg(
                f"'initial_state' dim for input name '{name}' doesn't match 'state' dim description. "
                f"{given} != {declared}"
            )


def _from_file(
    state: ModelSequenceBatching.State,
    file_name: str,
    datatype: datatypes.DataType,
    shape: tuple[int, ...],
    model_dir: Path | None,
) -> npt.NDArray[Any]:
    if model_dir is None:
        raise invalid_arg(f"initial_state data_file '{file_name}' of state '{state.input_name}' needs the model path")
    path = model_dir / INITIAL_STATE_FOLDER / file_name
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise invalid_arg(f"failed to read initial_state file '{path}': {error.strerror}") from None
    if datatype.wire == "BYTES":
        return _strings_as_copied(raw, shape)
    data = datatypes.from_raw(raw, datatype, shape)
    if data is None:
        needed = datatypes.element_count(shape) * datatype.byte_size
        raise invalid_arg(
            f"initial_state setting expects {needed} bytes, but the data provided from {file_name}only has "
            f"{len(raw)} bytes."
        )
    return data


def _strings_as_copied(raw: bytes, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """A TYPE_STRING initial state as a model sees the file Triton copies into the state unchecked: the
    length-prefixed elements that fit, then empty strings for the rest of the shape."""
    items: list[bytes] = []
    offset = 0
    count = datatypes.element_count(shape)
    while len(items) < count and offset + 4 <= len(raw):
        length = int.from_bytes(raw[offset : offset + 4], "little")
        if offset + 4 + length > len(raw):
            break
        items.append(raw[offset + 4 : offset + 4 + length])
        offset += 4 + length
    data = np.full(count, b"", dtype=np.object_)
    data[: len(items)] = items
    return data.reshape(shape)


class ImplicitState:
    """The current state tensors of every sequence slot; thread-safe."""

    def __init__(self, specs: list[StateSpec]) -> None:
        self.specs = specs
        self._by_output = {spec.output_name: spec for spec in specs}
        self._lock = threading.Lock()
        self._slots: dict[Hashable, dict[str, Tensor]] = {}

    def __bool__(self) -> bool:
        return bool(self.specs)

    def inputs_for(self, slot: Hashable, request: InferenceRequest) -> list[Tensor]:
        """The state inputs of a real request; marks its sender so the new state is captured."""
        with self._lock:
            current = self._slots.get(slot)
            if current is None or request.flags & SEQUENCE_START:
                current = {spec.input_name: spec.initial_tensor() for spec in self.specs}
                self._slots[slot] = current
            tensors = list(current.values())
        request.sender.client_outputs = frozenset(request.requested_outputs)
        request.sender.state_slot = slot
        for spec in self.specs:
            request.requested_outputs.setdefault(spec.output_name, RequestedOutput(spec.output_name))
        return tensors

    def null_inputs(self) -> list[Tensor]:
        """State inputs for a padding request: the initial state, never stored."""
        return [spec.initial_tensor() for spec in self.specs]

    def bind(self, forward: Deliver) -> Deliver:
        """The response-pipeline stage: capture each state output, drop the ones the client did not ask for."""

        def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
            response = event.response
            if sender.state_slot is not None and response is not None and response.error is None:
                kept: list[Tensor] = []
                for tensor in response.outputs:
                    spec = self._by_output.get(tensor.name)
                    if spec is not None:
                        with self._lock:
                            self._slots.setdefault(sender.state_slot, {})[spec.input_name] = Tensor(
                                spec.input_name, tensor.datatype, tensor.data
                            )
                    if spec is None or tensor.name in sender.client_outputs:
                        kept.append(tensor)
                response.outputs = kept
            forward(sender, event)

        return deliver
