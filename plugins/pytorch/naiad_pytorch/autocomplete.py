"""Auto-complete for TorchScript models: what the file can tell, and a clear error for the rest.

A TorchScript file records ``forward``'s argument names and return type, but no datatypes or
shapes. So, when the config leaves something out:

* inputs without a ``name`` get ``forward``'s argument names, in order;
* outputs without a ``name`` get ``OUTPUT__<index>``;
* inputs without ``data_type`` or ``dims`` cannot be completed: the load fails with a message
  listing what config.pbtxt must add (with ``forward``'s argument names filled in);
* missing outputs, or outputs without ``data_type``/``dims``, are completed by a *probe run*:
  ``forward`` runs on CPU on zero-valued inputs built from the config (batch 1 and 2, variable
  dimensions 3 and 5); each output's datatype is read, and dimensions that differ between the
  two runs become -1. Given values that disagree with the probe fail the load, naming both.

``max_batch_size`` and ``dynamic_batching`` are never changed: whether the first dimension is a
batch dimension is not recorded in the file. Triton's pytorch backend completes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import torch

from naiad.backend import DataType, ErrorCode, ModelConfig, ModelInput, ModelLoadContext, ModelOutput, NaiadError
from naiad_pytorch import convert, torchscript
from naiad_pytorch.binding import AddedTensors, Binding, OutputBinding, bind_inputs, named_index
from naiad_pytorch.execution import Call, summary
from naiad_pytorch.parameters import TorchParameters
from naiad_pytorch.schema import ForwardSchema, Kind

_log = logging.getLogger("naiad.pytorch")

# (batch size, size of each -1 dimension) of the two probe runs.
PROBE_RUNS = ((1, 3), (2, 5))


def complete_config(context: ModelLoadContext, model_file: Path, parameters: TorchParameters) -> ForwardSchema | None:
    """Complete ``context.config`` in place; returns the schema when the module had to be loaded."""
    config = context.config
    if _complete(config.input) and _complete(config.output):
        return None
    module = torchscript.load_module(
        context.model_name, model_file, torch.device("cpu"), inference_mode=parameters.inference_mode
    )
    schema = torchscript.schema_of(module)
    where = f"model '{context.model_name}': cannot auto-complete the configuration from '{model_file}'"
    _complete_inputs(where, config, schema)
    if not _complete(config.output):
        _name_outputs(where, config, schema)
        _probe_outputs(where, context.model_name, model_file, config, schema, module, parameters)
    return schema


def _complete(tensors: Sequence[ModelInput] | Sequence[ModelOutput]) -> bool:
    return bool(tensors) and all(t.name and t.data_type != DataType.TYPE_INVALID and t.dims for t in tensors)


def _complete_inputs(where: str, config: ModelConfig, schema: ForwardSchema) -> None:
    dict_input = len(schema.args) == 1 and schema.args[0].kind is Kind.TENSOR_DICT
    if not config.input:
        raise NaiadError(f"{where}: {_input_template(config, schema, dict_input)}", ErrorCode.INVALID_ARG)
    unnamed = [index for index, tensor in enumerate(config.input) if not tensor.name]
    if unnamed and dict_input:
        raise NaiadError(
            f"{where}: input(s) {unnamed} have no name and forward() takes one Dict[str, Tensor], whose keys the "
            "file does not record; name every input",
            ErrorCode.INVALID_ARG,
        )
    for index in unnamed:
        if index >= len(schema.args):
            raise NaiadError(
                f"{where}: input {index} has no name and forward() has only {len(schema.args)} argument(s) "
                f"({schema.describe()})",
                ErrorCode.INVALID_ARG,
            )
        config.input[index].name = schema.args[index].name
    incomplete = [t.name for t in config.input if t.data_type == DataType.TYPE_INVALID or not t.dims]
    if incomplete:
        raise NaiadError(
            f"{where}: input(s) {incomplete} need data_type and dims in config.pbtxt: a TorchScript file records "
            f"no datatypes or shapes ({schema.describe()})",
            ErrorCode.INVALID_ARG,
        )


def _input_template(config: ModelConfig, schema: ForwardSchema, dict_input: bool) -> str:
    names = ["<key>"] if dict_input else schema.arg_names
    inputs = ", ".join(f'{{ name: "{name}" data_type: TYPE_<...> dims: [ ... ] }}' for name in names)
    batch = "" if config.max_batch_size else "max_batch_size: <N, or 0 if the model has no batch dimension>, "
    return (
        f"a TorchScript file records no datatypes or shapes; add the inputs to config.pbtxt: {batch}input [ {inputs} ]"
        f" ({schema.describe()}). naiad then completes missing outputs by running the model once on zeros, "
        'or list them too: output [ { name: "OUTPUT__0" data_type: TYPE_<...> dims: [ ... ] } ]'
    )


def _name_outputs(where: str, config: ModelConfig, schema: ForwardSchema) -> None:
    unnamed = [index for index, tensor in enumerate(config.output) if not tensor.name]
    if unnamed and schema.returns.kind is Kind.TENSOR_DICT:
        raise NaiadError(
            f"{where}: output(s) {unnamed} have no name and forward() returns a Dict[str, Tensor]; name them after "
            "its keys",
            ErrorCode.INVALID_ARG,
        )
    for index in unnamed:
        config.output[index].name = f"OUTPUT__{index}"


def _probe_outputs(
    where: str,
    model_name: str,
    model_file: Path,
    config: ModelConfig,
    schema: ForwardSchema,
    module: torch.jit.ScriptModule,
    parameters: TorchParameters,
) -> None:
    batching = config.max_batch_size > 0
    added = AddedTensors.of(config)
    inputs = bind_inputs(model_name, model_file, schema, config.input, batching=batching, added=added)
    binding = Binding(inputs, OutputBinding("PROBE"))
    feeds = [*config.input, *added.inputs]  # sequence controls and states, batch inputs: zeros too
    call = Call(model_name, module, binding, schema.returns, feeds, [], batching=batching, input_device=None)
    runs: list[dict[str, tuple[str, list[int]]]] = []
    for batch, size in PROBE_RUNS:
        arrays = {tensor.name: _zeros(tensor, batch if batching else None, size) for tensor in feeds}
        try:
            with torch.inference_mode(parameters.inference_mode), torch.no_grad():
                result = module(**call.arguments(arrays))
        except Exception as error:
            shapes = {name: list(array.shape) for name, array in arrays.items()}
            raise NaiadError(
                f"{where}: the outputs are incomplete and a probe run of forward() on zero-valued inputs of shapes "
                f"{shapes} failed ({summary(error)}); list the outputs in config.pbtxt "
                "with name, data_type and dims, e.g. "
                'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]',
                ErrorCode.INVALID_ARG,
            ) from error
        runs.append(_describe(where, result, schema, batch if batching else None))
    probed = _merge(where, runs)
    _fill_outputs(where, config, probed)
    _log.info(
        "model '%s': completed outputs from a probe run of %s: %s",
        model_name,
        model_file,
        ", ".join(f"{t.name} {DataType.Name(t.data_type)} {list(t.dims)}" for t in config.output),
    )


def _zeros(tensor: ModelInput, batch: int | None, size: int) -> npt.NDArray[Any]:
    shape = ([batch] if batch is not None else []) + [size if dim == -1 else dim for dim in tensor.dims]
    if tensor.data_type == DataType.TYPE_STRING:
        return np.full(shape, b"", dtype=np.object_)
    if tensor.data_type == DataType.TYPE_BF16:
        return np.zeros(shape, dtype=np.uint16)
    return convert.to_array(torch.zeros(shape, dtype=convert.TORCH_DTYPE[tensor.data_type]))


def _describe(where: str, result: Any, schema: ForwardSchema, batch: int | None) -> dict[str, tuple[str, list[int]]]:
    """``name -> (config type, dims)`` of every output of one probe run."""
    if schema.returns.kind is Kind.TENSOR_DICT:
        values = dict(result)
    elif schema.returns.kind in (Kind.TUPLE, Kind.TENSOR_LIST):
        values = {f"OUTPUT__{index}": value for index, value in enumerate(result)}
    else:
        values = {"OUTPUT__0": result}
    described = {}
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            if value.dtype not in convert.CONFIG_TYPE:
                raise NaiadError(
                    f"{where}: output '{name}' is {value.dtype}, which has no Triton datatype", ErrorCode.INVALID_ARG
                )
            data_type, shape = convert.type_name(value.dtype), list(value.shape)
        elif isinstance(value, list):
            data_type, shape = "TYPE_STRING", [len(value)]
        else:
            continue  # not an output naiad can serve; only an error if the config names it
        if batch is not None:
            if not shape or shape[0] != batch:
                raise NaiadError(
                    f"{where}: output '{name}' has shape {shape} for a batch of {batch}; with max_batch_size > 0 "
                    "every output needs a leading batch dimension (or set max_batch_size: 0)",
                    ErrorCode.INVALID_ARG,
                )
            shape = shape[1:]
        if not shape:
            raise NaiadError(
                f"{where}: output '{name}' has no dimensions to list in dims; add it to config.pbtxt "
                "(a per-item scalar is dims: [ 1 ] with reshape: { shape: [ ] })",
                ErrorCode.INVALID_ARG,
            )
        described[name] = (data_type, shape)
    return described


def _merge(where: str, runs: list[dict[str, tuple[str, list[int]]]]) -> dict[str, tuple[str, list[int]]]:
    """Dims that differ between the probe runs become -1."""
    first, second = runs
    merged = {}
    for name, (data_type, dims) in first.items():
        other = second.get(name)
        if other is None or len(other[1]) != len(dims):
            raise NaiadError(
                f"{where}: output '{name}' changes rank or disappears between probe runs; list it in config.pbtxt",
                ErrorCode.INVALID_ARG,
            )
        merged[name] = (data_type, [a if a == b else -1 for a, b in zip(dims, other[1], strict=True)])
    return merged


def _fill_outputs(where: str, config: ModelConfig, probed: dict[str, tuple[str, list[int]]]) -> None:
    if not config.output:
        states = {named_index(state.output_name) for state in config.sequence_batching.state}
        for name, (data_type, dims) in probed.items():
            if named_index(name) not in states:  # that result is an implicit state's, not an output
                config.output.add(name=name, data_type=DataType.Value(data_type), dims=dims)
        return
    positional = {named_index(name): value for name, value in probed.items()}
    for index, output in enumerate(config.output):
        found = probed.get(output.name)
        if found is None and named_index(output.name) is not None:
            found = positional.get(named_index(output.name))
        if found is None and all(named_index(name) is not None for name in probed):
            found = positional.get(index)  # config order (Triton's strict ordering)
        if found is None:
            raise NaiadError(
                f"{where}: output '{output.name}' is not among the model's outputs {sorted(probed)}",
                ErrorCode.INVALID_ARG,
            )
        data_type, dims = found
        if output.data_type != DataType.TYPE_INVALID and DataType.Name(output.data_type) != data_type:
            raise NaiadError(
                f"{where}: output '{output.name}': config.pbtxt says data_type {DataType.Name(output.data_type)}, "
                f"the model produces {data_type}",
                ErrorCode.INVALID_ARG,
            )
        if output.dims and not _dims_agree(list(output.dims), dims):
            raise NaiadError(
                f"{where}: output '{output.name}': config.pbtxt says dims {list(output.dims)}, the model produces "
                f"{dims}",
                ErrorCode.INVALID_ARG,
            )
        output.data_type = cast(DataType, DataType.Value(data_type))
        if not output.dims:
            output.dims.extend(dims)


def _dims_agree(given: list[int], probed: list[int]) -> bool:
    if len(given) != len(probed):
        return False
    return all(a == -1 or b == -1 or a == b for a, b in zip(given, probed, strict=True))
