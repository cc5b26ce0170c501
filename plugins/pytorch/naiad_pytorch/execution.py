"""One ``forward`` call: config-named numpy inputs in, config-named numpy outputs out.

Used by the instances and by auto-complete's probe run. Errors carry Triton's texts where
Triton has one ("configuration expects datatype ...", "The output ... refers to an output index
which doesn't exist ...").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy.typing as npt
import torch

from naiad.backend import DataType, ErrorCode, ModelInput, ModelOutput, NaiadError, invalid_arg
from naiad_pytorch import convert
from naiad_pytorch.binding import DICT, Binding
from naiad_pytorch.schema import ForwardReturn, Kind

Arrays = dict[str, npt.NDArray[Any]]

_log = logging.getLogger("naiad.pytorch")


class Call:
    """How to call one module for one config: argument building, invocation, output reading."""

    def __init__(
        self,
        model_name: str,
        module: torch.jit.ScriptModule,
        binding: Binding,
        returns: ForwardReturn,
        inputs: Sequence[ModelInput],
        outputs: Sequence[ModelOutput],
        *,
        batching: bool,
        input_device: torch.device | None,
    ) -> None:
        self.model_name = model_name
        self.module = module
        self.binding = binding
        self.returns = returns
        self.inputs = {tensor.name: tensor for tensor in inputs}
        self.outputs = list(outputs)
        self.batching = batching
        self.input_device = input_device

    def __call__(self, arrays: Mapping[str, npt.NDArray[Any]]) -> Arrays:
        """Run ``forward`` on ``arrays`` and return every config output (caller sets torch modes)."""
        batch = next(iter(arrays.values())).shape[0] if self.batching and arrays else None
        try:
            result = self.module(**self.arguments(arrays))
        except NaiadError:
            raise
        except Exception as error:
            _log.debug("model '%s': forward() failed", self.model_name, exc_info=error)
            raise NaiadError(f"PyTorch execute failure: {summary(error)}", ErrorCode.INTERNAL) from error
        return self.read(result, batch)

    def arguments(self, arrays: Mapping[str, npt.NDArray[Any]]) -> dict[str, Any]:
        """``forward``'s keyword arguments for the request's inputs."""
        values = {name: self._value(name, array) for name, array in arrays.items()}
        bound = self.binding.inputs
        if bound.convention == DICT:
            assert bound.dict_argument is not None
            return {bound.dict_argument: values}
        return {bound.argument_of[name]: value for name, value in values.items()}

    def _value(self, name: str, array: npt.NDArray[Any]) -> Any:
        spec = self.inputs[name]
        if spec.data_type == DataType.TYPE_STRING:
            return convert.to_strings(name, array)
        tensor = convert.to_tensor(array, spec.data_type)
        if self.input_device is not None and self.input_device.type != "cpu":
            tensor = tensor.to(self.input_device)
        return tensor

    def read(self, result: Any, batch: int | None) -> Arrays:
        """Every config output of ``result``, checked against the config's datatypes."""
        if self.binding.outputs.convention == DICT:
            if not isinstance(result, dict):
                raise NaiadError(
                    f"model '{self.model_name}' returned {type(result).__name__}, expected Dict[str, Tensor]",
                    ErrorCode.INTERNAL,
                )
            values = result
        else:
            items = list(result) if self.returns.kind in (Kind.TUPLE, Kind.TENSOR_LIST) else [result]
            values = {}
            for output in self.outputs:
                index = self.binding.outputs.index_of[output.name]
                if index >= len(items):
                    raise invalid_arg(
                        f"The output {output.name} in the model configuration refers to an output index "
                        f"which doesn't exist. This model has {len(items)} outputs"
                    )
                values[output.name] = items[index]
        arrays: Arrays = {}
        for output in self.outputs:
            if output.name not in values:
                raise invalid_arg(
                    f"model '{self.model_name}' returned no output '{output.name}': forward() returned "
                    f"the keys {sorted(values)}"
                )
            arrays[output.name] = self._array(output, values[output.name], batch)
        return arrays

    def _array(self, output: ModelOutput, value: Any, batch: int | None) -> npt.NDArray[Any]:
        if isinstance(value, torch.Tensor):
            provided = convert.type_name(value.dtype)
            if value.dim() == 0:
                raise invalid_arg(f"output '{output.name}' is a scalar which is not supported.")
            leading = value.shape[0]
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            provided = "TYPE_STRING"
            leading = len(value)
        else:
            raise invalid_arg(f"output '{output.name}' must be of type Tensor or List[str].")
        if provided != DataType.Name(output.data_type):
            raise invalid_arg(
                f"configuration expects datatype {DataType.Name(output.data_type)} for output "
                f"'{output.name}', model provides {provided}"
            )
        if batch is not None and leading != batch:
            raise invalid_arg(
                f"output '{output.name}' of model '{self.model_name}' has {leading} rows for a batch of {batch}: "
                "with max_batch_size > 0 every output's first dimension is the batch"
            )
        return convert.to_array(value) if isinstance(value, torch.Tensor) else convert.from_strings(value)


def summary(error: BaseException) -> str:
    """``Type: message``, without the TorchScript interpreter's source traceback (that goes to the debug log)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        return lines[-1]
    return f"{type(error).__name__}: {chr(10).join(lines)}" if lines else type(error).__name__
