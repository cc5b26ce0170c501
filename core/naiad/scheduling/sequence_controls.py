"""The control tensors Triton's sequence batcher feeds a model: START, END, READY, CORRID.

Each is shape ``[1]``, or ``[1, 1]`` when the model batches, and carries the configured
datatype and ``[false, true]`` values. Backends see them as ordinary request inputs, ahead of the
client's, in the order Triton 2.51's python backend lists them: the order its map of the request's
inputs walks them once the batcher has added START, END, READY and CORRID after the client's inputs
(:mod:`naiad.hash_order`; checked side by side: controls named START, END, READY, CORRID come as
READY, CORRID, END, START).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import invalid_arg
from naiad.hash_order import map_order
from naiad.inference import SEQUENCE_END, SEQUENCE_START
from naiad.protocol.model_config_pb2 import DataType, ModelConfig, ModelSequenceBatching
from naiad.tensor import Tensor

CorrelationId = int | str

_CONTROL = ModelSequenceBatching.Control
_UINT64_MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class BoolControl:
    """A START, END or READY control: its tensor name, datatype and ``[false, true]`` values."""

    name: str
    datatype: datatypes.DataType
    false: Any
    true: Any

    def tensor(self, value: bool, shape: tuple[int, ...]) -> Tensor:
        data = np.full(shape, self.true if value else self.false, dtype=self.datatype.numpy)
        return Tensor(self.name, self.datatype.wire, data)


@dataclass(frozen=True, slots=True)
class SequenceControls:
    """The control inputs a config declares, and how to build them for one request."""

    start: BoolControl | None = None
    end: BoolControl | None = None
    ready: BoolControl | None = None
    corrid: tuple[str, datatypes.DataType] | None = None
    batching: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return (1, 1) if self.batching else (1,)

    def tensors(
        self, flags: int, correlation_id: CorrelationId, input_names: Sequence[str], *, ready: bool = True
    ) -> list[Tensor]:
        """The controls of one request with ``input_names`` (``ready=False``: a padding slot), in the
        order Triton shows them."""
        start = ready and bool(flags & SEQUENCE_START)
        end = ready and bool(flags & SEQUENCE_END)
        tensors: list[Tensor] = []
        for control, value in ((self.start, start), (self.end, end), (self.ready, ready)):
            if control is not None:
                tensors.append(control.tensor(value, self.shape))
        if self.corrid is not None:
            name, datatype = self.corrid
            tensors.append(
                Tensor(name, datatype.wire, corrid_array(correlation_id if ready else 0, datatype, self.shape))
            )
        order = _controls_order(tuple(input_names), tuple(tensor.name for tensor in tensors))
        return [tensors[index] for index in order]

    def check_id(self, correlation_id: CorrelationId) -> None:
        """Refuse an integer id for a TYPE_STRING CORRID as Triton 2.51 does (its text)."""
        if self.corrid is not None and self.corrid[1].wire == "BYTES" and isinstance(correlation_id, int):
            raise invalid_arg(
                f"unexpected number of string elements 2 for inference input '{self.corrid[0]}', expecting 1"
            )


@lru_cache(maxsize=256)
def _controls_order(input_names: tuple[str, ...], control_names: tuple[str, ...]) -> tuple[int, ...]:
    """Where Triton's walk of a map filled with ``input_names`` then ``control_names`` meets each control."""
    first = len(input_names)
    walk = map_order(input_names + control_names)
    return tuple(index - first for index in walk if index >= first)


def corrid_array(
    correlation_id: CorrelationId, datatype: datatypes.DataType, shape: tuple[int, ...]
) -> npt.NDArray[Any]:
    """The CORRID control value as Triton writes it.

    Integers are stored as uint64 and truncated to the datatype's width. A string id with a
    numeric CORRID gets the bytes Triton copies: a 4-byte length then the string, cut to width.
    """
    if datatype.wire == "BYTES":
        text = correlation_id if isinstance(correlation_id, str) else ""
        return np.full(shape, text.encode(), dtype=np.object_)
    if isinstance(correlation_id, str):
        encoded = correlation_id.encode()
        raw = len(encoded).to_bytes(4, "little") + encoded
    else:
        raw = (correlation_id & _UINT64_MASK).to_bytes(8, "little")
    raw = raw[: datatype.byte_size].ljust(datatype.byte_size, b"\0")
    value = np.frombuffer(raw, dtype=datatype.numpy.newbyteorder("<"))[0]
    return np.full(shape, value, dtype=datatype.numpy)


def controls_from_config(config: ModelConfig) -> SequenceControls:
    """The control inputs of a (validated) config's ``sequence_batching`` section."""
    found: dict[int, tuple[str, ModelSequenceBatching.Control]] = {}
    for control_input in config.sequence_batching.control_input:
        for control in control_input.control:
            found[control.kind] = (control_input.name, control)
    corrid = found.get(_CONTROL.CONTROL_SEQUENCE_CORRID)
    return SequenceControls(
        start=_bool_control(found.get(_CONTROL.CONTROL_SEQUENCE_START)),
        end=_bool_control(found.get(_CONTROL.CONTROL_SEQUENCE_END)),
        ready=_bool_control(found.get(_CONTROL.CONTROL_SEQUENCE_READY)),
        corrid=None if corrid is None else (corrid[0], datatypes.BY_NUMBER[corrid[1].data_type]),
        batching=config.max_batch_size != 0,
    )


def control_datatype(control_input: ModelSequenceBatching.ControlInput) -> DataType:
    """The ``DataType`` of a control input's tensor: the CORRID's ``data_type``, or the type of the
    ``*_false_true`` values of a START, END or READY control (``TYPE_INVALID`` when it gives none)."""
    for control in control_input.control:
        if control.data_type:
            return control.data_type
        if len(control.int32_false_true):
            return DataType.TYPE_INT32
        if len(control.fp32_false_true):
            return DataType.TYPE_FP32
        if len(control.bool_false_true):
            return DataType.TYPE_BOOL
    return DataType.TYPE_INVALID


def _bool_control(entry: tuple[str, ModelSequenceBatching.Control] | None) -> BoolControl | None:
    if entry is None:
        return None
    name, control = entry
    if len(control.int32_false_true) == 2:
        return BoolControl(name, datatypes.BY_WIRE["INT32"], *control.int32_false_true)
    if len(control.fp32_false_true) == 2:
        return BoolControl(name, datatypes.BY_WIRE["FP32"], *control.fp32_false_true)
    return BoolControl(name, datatypes.BY_WIRE["BOOL"], *control.bool_false_true)
