"""Matching config inputs and outputs to ``forward``'s arguments and results, as Triton does.

Inputs (Triton's ``GetNamingConvention``, first rule that holds for every config input):

1. FORWARD_ARGUMENT: each name is an argument name of ``forward``;
2. NAMED_INDEX: each name is ``<name>__<index>``; the index picks the argument;
3. STRICT_CONFIG_ORDERING: the i-th config input is the i-th argument (logged as a warning).

A ``forward`` whose only argument is ``Dict[str, Tensor]`` gets every input in that dict,
keyed by its config name. Outputs are NAMED_INDEX (``OUTPUT__1`` is the second item of the
returned tuple) or else config order; a model returning ``Dict[str, Tensor]`` is read by the
output names (a naiad extension).

A sequence model's control inputs (START, END, READY, CORRID) must be named ``<name>__<index>``;
its implicit-state inputs follow the config inputs' convention, and its state outputs are named
``<name>__<index>``, as in Triton.

Everything here is checked before an instance serves: a mismatch is a load error naming the
model, the file, the tensor and what the model has instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naiad.backend import (
    DataType,
    ErrorCode,
    ModelConfig,
    ModelInput,
    ModelOutput,
    NaiadError,
    control_datatype,
    invalid_arg,
)
from naiad_pytorch.schema import ForwardSchema, Kind

_log = logging.getLogger("naiad.pytorch")

FORWARD_ARGUMENT = "FORWARD_ARGUMENT"
NAMED_INDEX = "NAMED_INDEX"
STRICT_CONFIG_ORDERING = "STRICT_CONFIG_ORDERING"
DICT = "DICT"

# Datatypes a TorchScript tensor can carry (Triton's list plus BF16); TYPE_STRING maps to List[str].
TENSOR_TYPES = frozenset(
    {
        DataType.TYPE_BOOL,
        DataType.TYPE_UINT8,
        DataType.TYPE_INT8,
        DataType.TYPE_INT16,
        DataType.TYPE_INT32,
        DataType.TYPE_INT64,
        DataType.TYPE_FP16,
        DataType.TYPE_FP32,
        DataType.TYPE_FP64,
        DataType.TYPE_BF16,
    }
)


@dataclass(frozen=True, slots=True)
class InputBinding:
    """Where each config input goes: a ``forward`` argument, or a key of the one dict argument."""

    convention: str
    argument_of: dict[str, str] = field(default_factory=dict)  # config name -> forward argument
    dict_argument: str | None = None


@dataclass(frozen=True, slots=True)
class OutputBinding:
    """Where each config output comes from: a position in the results, or a key of the returned dict."""

    convention: str
    index_of: dict[str, int] = field(default_factory=dict)  # empty for DICT


@dataclass(frozen=True, slots=True)
class Binding:
    inputs: InputBinding
    outputs: OutputBinding


def named_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` tensor name, else None (split at the first ``__``; an empty
    index is 0, as Triton reads it)."""
    _, separator, index = name.partition("__")
    if separator and (not index or (index.isascii() and index.isdigit())):
        return int(index or "0")
    return None


def _first_bad_index(names: Sequence[str]) -> str | None:
    """The name that ends Triton's NAMED_INDEX check, when Triton warns about it: the first name
    that is not ``<name>__<index>``, if it has a ``__`` (a name without one falls back silently)."""
    bad = next((name for name in names if named_index(name) is None), None)
    return bad if bad is not None and "__" in bad else None


@dataclass(frozen=True, slots=True)
class AddedTensors:
    """The tensors the core adds to a config's own: a sequence batcher's control and state inputs and
    state outputs, and the ragged batcher's batch inputs (batch outputs are config outputs already)."""

    controls: tuple[ModelInput, ...] = ()
    states: tuple[ModelInput, ...] = ()
    batch_inputs: tuple[ModelInput, ...] = ()
    state_outputs: tuple[ModelOutput, ...] = ()

    @classmethod
    def of(cls, config: ModelConfig) -> AddedTensors:
        sequence = config.sequence_batching
        return cls(
            tuple(
                ModelInput(name=control.name, data_type=control_datatype(control), dims=[1])
                for control in sequence.control_input
            ),
            tuple(
                ModelInput(name=state.input_name, data_type=state.data_type, dims=state.dims)
                for state in sequence.state
            ),
            tuple(
                ModelInput(name=target, data_type=batch_input.data_type, dims=[-1])
                for batch_input in config.batch_input
                for target in batch_input.target_name
            ),
            tuple(
                ModelOutput(name=state.output_name, data_type=state.data_type, dims=state.dims)
                for state in sequence.state
            ),
        )

    @property
    def inputs(self) -> tuple[ModelInput, ...]:
        return self.controls + self.states + self.batch_inputs

    def extra_outputs(self, outputs: Sequence[ModelOutput]) -> list[ModelOutput]:
        """The state outputs that are not also config outputs."""
        names = {output.name for output in outputs}
        return [output for output in self.state_outputs if output.name not in names]


class _Where:
    """Prefixes messages with the model and file they are about."""

    def __init__(self, model_name: str, model_file: Path, schema: ForwardSchema) -> None:
        self.model_name = model_name
        self.model_file = model_file
        self.schema = schema

    def error(self, message: str) -> Exception:
        return invalid_arg(
            f"unable to load model '{self.model_name}' ({self.model_file}): {message}; "
            f"the model's signature is {self.schema.describe()}"
        )

    def internal(self, message: str) -> Exception:
        """Triton's INTERNAL load errors (sequence controls), with the model and file added."""
        return NaiadError(f"{message} (model '{self.model_name}', {self.model_file})", ErrorCode.INTERNAL)


def bind(
    model_name: str,
    model_file: Path,
    schema: ForwardSchema,
    inputs: Sequence[ModelInput],
    outputs: Sequence[ModelOutput],
    *,
    batching: bool,
    added: AddedTensors | None = None,
) -> Binding:
    """Check the config against ``forward`` and return how to call it and read its results."""
    return Binding(
        bind_inputs(model_name, model_file, schema, inputs, batching=batching, added=added),
        bind_outputs(model_name, model_file, schema, outputs, batching=batching, added=added),
    )


def bind_inputs(
    model_name: str,
    model_file: Path,
    schema: ForwardSchema,
    inputs: Sequence[ModelInput],
    *,
    batching: bool,
    added: AddedTensors | None = None,
) -> InputBinding:
    """Which ``forward`` argument (or dict key) each config input, and each input the core adds (sequence
    controls and states, batch inputs), feeds."""
    where = _Where(model_name, model_file, schema)
    added = added or AddedTensors()
    if not inputs:
        raise where.error("model configuration must contain at least one input, none were specified")
    for tensor in inputs:
        _check_datatype(where, "input", tensor, batching)
    for control in added.controls:
        _check_control(where, control)
    for state in added.states:
        _check_datatype(where, "input state", state, batching)
    for batch_input in added.batch_inputs:
        _check_datatype(where, "batch input", batch_input, batching)
    return _bind_inputs(where, inputs, added)


def bind_outputs(
    model_name: str,
    model_file: Path,
    schema: ForwardSchema,
    outputs: Sequence[ModelOutput],
    *,
    batching: bool,
    added: AddedTensors | None = None,
) -> OutputBinding:
    """Which result of ``forward`` (position or dict key) each config output and state output reads."""
    where = _Where(model_name, model_file, schema)
    added = added or AddedTensors()
    if not outputs:
        raise where.error("model configuration must contain at least one output, none were specified")
    for output in outputs:
        _check_datatype(where, "output", output, batching)
    for state in added.state_outputs:
        _check_datatype(where, "state", state, batching)
    return _bind_outputs(where, outputs, added)


def _check_control(where: _Where, control: ModelInput) -> None:
    """Triton's checks of a sequence control input: a ``<name>__<index>`` name and a tensor datatype."""
    if named_index(control.name) is None:
        raise where.internal(f"input '{control.name}' does not follow <name>__<index> naming convention.")
    if control.data_type not in TENSOR_TYPES:
        raise where.internal(
            f"input '{control.name}' type '{DataType.Name(control.data_type)}' is not supported by PyTorch."
        )


def _check_datatype(where: _Where, kind: str, tensor: ModelInput | ModelOutput, batching: bool) -> None:
    if tensor.data_type == DataType.TYPE_STRING:
        rank = len(tensor.reshape.shape) if tensor.HasField("reshape") else len(tensor.dims)
        if rank + (1 if batching else 0) > 1:
            raise where.error(
                f"Triton only supports 1 dimensional List of String as {kind} for '{tensor.name}'"
                " (TYPE_STRING needs dims: [ -1 ] without batching, or dims: [ 1 ] with reshape: { shape: [ ] }"
                " with max_batch_size > 0)"
            )
    elif tensor.data_type not in TENSOR_TYPES:
        raise where.error(
            f"unsupported datatype {DataType.Name(tensor.data_type)} for {kind} '{tensor.name}' for model "
            f"'{where.model_name}' (PyTorch tensors take BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, FP32, FP64 "
            "or BF16)"
        )


def _bind_inputs(where: _Where, inputs: Sequence[ModelInput], added: AddedTensors) -> InputBinding:
    args = where.schema.args
    dict_args = [arg for arg in args if arg.kind is Kind.TENSOR_DICT]
    if dict_args:
        if len(args) != 1:
            raise where.error(
                "Multiple inputs of kind DictType were detected or a DictType input is mixed with others. "
                "Only a single input of type Dict(str, Tensor) is supported"
            )
        for tensor in [*inputs, *added.states]:
            if tensor.data_type == DataType.TYPE_STRING:
                raise where.error(f"input '{tensor.name}' is TYPE_STRING but Dict[str, Tensor] values are tensors")
        return InputBinding(DICT, dict_argument=dict_args[0].name)

    # The convention is the config inputs'; state and batch inputs follow it, controls are always indexed.
    names = [tensor.name for tensor in inputs]
    arg_names = where.schema.arg_names
    states = [*added.states, *added.batch_inputs]
    if all(name in arg_names for name in names):
        convention, positions = FORWARD_ARGUMENT, [arg_names.index(name) for name in names]
        positions += [_added_position(where, state.name, by_argument=True) for state in states]
    elif all(named_index(name) is not None for name in names):
        convention, positions = NAMED_INDEX, [named_index(name) or 0 for name in names]
        positions += [_added_position(where, state.name, by_argument=False) for state in states]
    else:
        convention, positions = STRICT_CONFIG_ORDERING, list(range(len(names) + len(states)))
        bad = _first_bad_index(names)
        if bad is not None:
            _log.warning(
                "input '%s' or previous input(s) are neither an input argument to the model '%s' nor do they "
                "follow the <name>__<index> naming convention. Falling back to enforcing strict ordering "
                "from model configuration.",
                bad,
                where.model_name,
            )
    bound = [*inputs, *states, *added.controls]
    positions += [named_index(control.name) or 0 for control in added.controls]
    if len(bound) > len(args):
        raise where.error(f"configuration expects {len(bound)} inputs, model provides {len(args)}")
    argument_of: dict[str, str] = {}
    taken: dict[int, str] = {}
    for tensor, position in zip(bound, positions, strict=True):
        if position >= len(args):
            raise where.error(
                f"input '{tensor.name}' refers to forward argument index {position}, "
                f"but the model takes {len(args)} argument(s)"
            )
        if position in taken:
            raise where.error(f"inputs '{taken[position]}' and '{tensor.name}' both map to argument {position}")
        taken[position] = tensor.name
        arg = args[position]
        string = tensor.data_type == DataType.TYPE_STRING
        if arg.kind is Kind.STRING_LIST and not string:
            raise where.error(
                f"input '{tensor.name}' is {DataType.Name(tensor.data_type)} but forward argument "
                f"'{arg.name}' is List[str]; use data_type: TYPE_STRING"
            )
        if arg.kind in (Kind.TENSOR, Kind.OPTIONAL_TENSOR) and string:
            raise where.error(
                f"input '{tensor.name}' is TYPE_STRING but forward argument '{arg.name}' is a Tensor; "
                "TorchScript takes strings only as List[str]"
            )
        if arg.kind not in (Kind.TENSOR, Kind.OPTIONAL_TENSOR, Kind.STRING_LIST):
            raise where.error(
                f"An input of type '{arg.type_name}' was detected in the model (argument '{arg.name}', "
                f"config input '{tensor.name}'). Only a single input of type Dict(str, Tensor) or "
                "input(s) of type Tensor are supported"
            )
        argument_of[tensor.name] = arg.name
    missing = [arg.name for index, arg in enumerate(args) if index not in taken and not arg.has_default]
    if missing:
        raise where.error(
            f"configuration expects {len(bound)} inputs, model provides {len(args)}: "
            f"no config input for forward argument(s) {missing} (config inputs: {[t.name for t in bound]})"
        )
    return InputBinding(convention, argument_of=argument_of)


def _added_position(where: _Where, name: str, *, by_argument: bool) -> int:
    """The argument a state or batch input feeds: the argument of that name or its ``__<index>``, the
    config inputs' convention first."""
    arg_names = where.schema.arg_names
    by_name = arg_names.index(name) if name in arg_names else None
    by_index = named_index(name)
    first, second = (by_name, by_index) if by_argument else (by_index, by_name)
    position = first if first is not None else second
    if position is None:
        raise where.error(
            f"input '{name}' (an implicit state or batch input) is neither an argument of forward() nor named "
            "<name>__<index> (the argument's index)"
        )
    return position


def _bind_outputs(where: _Where, outputs: Sequence[ModelOutput], added: AddedTensors) -> OutputBinding:
    returns = where.schema.returns
    if returns.kind is Kind.TENSOR_DICT:
        for output in [*outputs, *added.state_outputs]:
            if output.data_type == DataType.TYPE_STRING:
                raise where.error(f"output '{output.name}' is TYPE_STRING but Dict[str, Tensor] values are tensors")
        return OutputBinding(DICT)
    if returns.kind not in (Kind.TENSOR, Kind.TUPLE, Kind.STRING_LIST, Kind.TENSOR_LIST):
        raise where.error(
            f"forward() returns {returns.type_name}; output must be of type Tensor, List[str], "
            "a Tuple or List of these, or Dict[str, Tensor]"
        )
    names = [output.name for output in outputs]
    if all(named_index(name) is not None for name in names):
        convention, positions = NAMED_INDEX, [named_index(name) or 0 for name in names]
    else:
        convention, positions = STRICT_CONFIG_ORDERING, list(range(len(names)))
        bad = _first_bad_index(names)
        if bad is not None:
            _log.warning(
                "output '%s' or previous output(s) of the model '%s' do not follow the <name>__<index> naming "
                "convention. Falling back to enforcing strict ordering from model configuration.",
                bad,
                where.model_name,
            )
    index_of = dict(zip(names, positions, strict=True))
    for state in added.state_outputs:  # always <name>__<index>, also when a config output too
        index = named_index(state.name)
        if index is None:
            raise where.error(f"output state '{state.name}' does not follow the <name>__<index> naming convention")
        index_of[state.name] = index
    bound = {output.name: output for output in [*outputs, *added.state_outputs]}
    count = returns.count
    for output in bound.values():
        position = index_of[output.name]
        if count is not None and position >= count:
            raise where.error(
                f"The output {output.name} in the model configuration refers to an output index which "
                f"doesn't exist. This model has {count} outputs"
            )
        kind = returns.element_kind(position) if count is not None else Kind.TENSOR
        if kind not in (Kind.TENSOR, Kind.STRING_LIST):
            raise where.error(
                f"output '{output.name}' (index {position}) is of type {kind.value}; "
                "outputs must be of type Tensor or List[str]"
            )
        string = output.data_type == DataType.TYPE_STRING
        if kind is Kind.STRING_LIST and not string:
            raise where.error(
                f"configuration expects datatype {DataType.Name(output.data_type)} for output "
                f"'{output.name}', model provides TYPE_STRING (List[str])"
            )
        if kind is Kind.TENSOR and string:
            raise where.error(f"output '{output.name}' is TYPE_STRING but the model returns a Tensor there")
    return OutputBinding(convention, index_of=index_of)
