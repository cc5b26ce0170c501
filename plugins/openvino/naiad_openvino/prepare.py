"""Checking a model config against the OpenVINO model and shaping the model to serve it.

Mirrors Triton's openvino backend (``ValidateInputs`` / ``ValidateOutputs``):

* the config lists as many inputs as the model has, each under one of the model's tensor
  names; outputs may be a subset;
* config datatypes may differ from the model's element types: OpenVINO converts on the way
  in and out (``PrePostProcessor``), as in Triton;
* config dims (``reshape.shape`` when given) must fit the model's partial shape: config
  ``-1`` input dimensions are not compared, output dimensions are compared exactly, and a
  dynamic model dimension accepts any value within its bounds;
* ``max_batch_size > 0``: every input gets a dynamic batch dimension (a static one of
  ``max_batch_size`` with ``SKIP_OV_DYNAMIC_BATCHSIZE``);
* ``RESHAPE_IO_LAYERS``: inputs are reshaped to the config dims instead of being compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from naiad.backend import ModelConfig, ModelInput, ModelOutput, NaiadError, SuggestingError, close_matches, invalid_arg
from naiad_openvino import elements, shapes
from naiad_openvino.parameters import OpenVinoOptions
from naiad_openvino.reader import ov_message


@dataclass(slots=True)
class PreparedModel:
    """An ``ov.Model`` ready to compile, and how config tensors map onto its ports."""

    model: Any
    input_ports: dict[str, int]
    output_ports: dict[str, int]
    static_batch: int | None = None  # SKIP_OV_DYNAMIC_BATCHSIZE: the only batch size the model takes


def prepare(ov_model: Any, config: ModelConfig, options: OpenVinoOptions, source: str) -> PreparedModel:
    """Validate ``config`` against a copy of ``ov_model`` and reshape/convert that copy."""
    return _Preparer(ov_model.clone(), config, options, source).run()


class _Preparer:
    def __init__(self, ov_model: Any, config: ModelConfig, options: OpenVinoOptions, source: str) -> None:
        self.model = ov_model
        self.config = config
        self.options = options
        self.source = source
        self.batching = config.max_batch_size > 0

    def run(self) -> PreparedModel:
        input_ports = self._check_inputs()
        self._reshape(input_ports)
        output_ports = self._check_outputs()
        self._convert_types(input_ports, output_ports)
        return PreparedModel(
            model=self.model,
            input_ports=input_ports,
            output_ports=output_ports,
            static_batch=self.config.max_batch_size if self.batching and self.options.skip_dynamic_batch else None,
        )

    # -- inputs ---------------------------------------------------------------------------

    def _check_inputs(self) -> dict[str, int]:
        ports = list(self.model.inputs)
        if len(self.config.input) != len(ports):
            raise invalid_arg(
                f"unable to load model '{self.config.name}', configuration expects {len(self.config.input)} "
                f"inputs, model provides {len(ports)} ({_names(ports)} in '{self.source}')"
            )
        indices = self._port_indices(self.config.input, ports, "input")
        for tensor in self.config.input:
            port = ports[indices[tensor.name]]
            self._check_datatype(tensor, port, "input")
            self._check_batch_rank(tensor, port, "input")
            if not self.options.reshape_io_layers:
                self._check_dims(tensor, port, "input", exact=False)
        return indices

    def _reshape(self, input_ports: dict[str, int]) -> None:
        """Apply RESHAPE_IO_LAYERS and the batch dimension in one ``ov.Model.reshape``."""
        import openvino as ov

        ports = list(self.model.inputs)
        batch = ov.Dimension(self.config.max_batch_size) if self.options.skip_dynamic_batch else ov.Dimension()
        wanted: dict[int, Any] = {}
        for tensor in self.config.input:
            index = input_ports[tensor.name]
            current = ports[index].get_partial_shape()
            if self.options.reshape_io_layers:
                dims = [ov.Dimension(dim) if dim > 0 else ov.Dimension() for dim in _config_dims(tensor)]
                shape = ov.PartialShape([batch, *dims] if self.batching else dims)
            elif self.batching and current.rank.is_static:
                shape = ov.PartialShape([batch, *list(current)[1:]])
            else:
                continue
            if str(shape) != str(current):
                wanted[index] = shape
        if not wanted:
            return
        try:
            self.model.reshape({ports[index]: shape for index, shape in wanted.items()})
        except Exception as error:
            described = ", ".join(f"'{ports[i].get_any_name()}' to {s}" for i, s in wanted.items())
            hint = (
                "; set parameter SKIP_OV_DYNAMIC_BATCHSIZE to YES (with ENABLE_BATCH_PADDING) if the model "
                "cannot take a dynamic batch size"
                if self.batching and not self.options.skip_dynamic_batch
                else ""
            )
            raise invalid_arg(
                f"model '{self.config.name}': OpenVINO cannot reshape input {described} of '{self.source}': "
                f"{ov_message(error)}{hint}"
            ) from None

    # -- outputs --------------------------------------------------------------------------

    def _check_outputs(self) -> dict[str, int]:
        ports = list(self.model.outputs)
        indices = self._port_indices(self.config.output, ports, "output")
        for tensor in self.config.output:
            port = ports[indices[tensor.name]]
            self._check_datatype(tensor, port, "output")
            self._check_batch_rank(tensor, port, "output")
            self._check_dims(tensor, port, "output", exact=True)
        return indices

    # -- shared checks --------------------------------------------------------------------

    def _port_indices(self, tensors: Sequence[ModelInput | ModelOutput], ports: list[Any], kind: str) -> dict[str, int]:
        by_name = {name: index for index, port in enumerate(ports) for name in port.get_names()}
        indices: dict[str, int] = {}
        for tensor in tensors:
            if tensor.name not in by_name:
                raise SuggestingError(
                    f"model '{self.config.name}': unexpected inference {kind} '{tensor.name}', allowed {kind}s are: "
                    f"{_names(ports)} (the {kind}s of '{self.source}'); fix the name in config.pbtxt",
                    name=tensor.name,
                    suggestions=close_matches(tensor.name, by_name),
                )
            indices[tensor.name] = by_name[tensor.name]
        return indices

    def _check_datatype(self, tensor: ModelInput | ModelOutput, port: Any, kind: str) -> None:
        if elements.ov_type_of(tensor.data_type) is None:
            raise invalid_arg(
                f"model '{self.config.name}': unsupported datatype {elements.config_type_name(tensor.data_type)} "
                f"for {kind} '{tensor.name}' (element type {elements.ov_type_label(port.get_element_type())} in "
                f"'{self.source}'); the openvino backend takes BOOL, UINT8-64, INT8-64, FP16, FP32 and FP64"
            )

    def _check_batch_rank(self, tensor: ModelInput | ModelOutput, port: Any, kind: str) -> None:
        shape = port.get_partial_shape()
        if self.batching and shape.rank.is_static and len(shape) == 0:
            raise invalid_arg(
                f"model '{self.config.name}', {kind} '{tensor.name}': for the model to support batching the shape "
                f"should have at least 1 dimension, but it is a scalar in '{self.source}'; set max_batch_size: 0"
            )

    def _check_dims(self, tensor: ModelInput | ModelOutput, port: Any, kind: str, *, exact: bool) -> None:
        dims = _config_dims(tensor)
        full = [self.config.max_batch_size, *dims] if self.batching else list(dims)
        shape = port.get_partial_shape()
        if shapes.dims_match(shape, full, exact=exact, skip_first=self.batching and not exact):
            return
        model = shapes.fmt_partial(shape)
        rank = "?" if shape.rank.is_dynamic else str(len(shape))
        if self.batching:
            specified = (
                f"{len(full)} dimensions (an initial batch dimension because max_batch_size > 0 followed by the "
                f"explicit tensor shape, making complete shape {shapes.fmt([-1, *dims])})"
            )
        else:
            specified = f"{len(full)} dimensions (shape {shapes.fmt(dims)})"
        raise invalid_arg(
            f"model '{self.config.name}', {kind} '{tensor.name}': the model expects {rank} dimensions "
            f"(shape {model} in '{self.source}') but the model configuration specifies {specified}"
        )

    def _convert_types(self, input_ports: dict[str, int], output_ports: dict[str, int]) -> None:
        """Let OpenVINO convert between config datatypes and the model's element types."""
        from openvino.preprocess import PrePostProcessor

        ppp = PrePostProcessor(self.model)
        changed = False
        for tensor in self.config.input:
            index = input_ports[tensor.name]
            wanted = elements.ov_type_of(tensor.data_type)
            if wanted != self.model.inputs[index].get_element_type():
                ppp.input(index).tensor().set_element_type(wanted)
                changed = True
        for output in self.config.output:
            index = output_ports[output.name]
            wanted = elements.ov_type_of(output.data_type)
            if wanted != self.model.outputs[index].get_element_type():
                ppp.output(index).tensor().set_element_type(wanted)
                changed = True
        if not changed:
            return
        try:
            self.model = ppp.build()
        except Exception as error:
            raise NaiadError(
                f"model '{self.config.name}': OpenVINO cannot convert between the config datatypes and the "
                f"element types of '{self.source}': {ov_message(error)}"
            ) from None


def _config_dims(tensor: ModelInput | ModelOutput) -> list[int]:
    """The dims the model itself sees: ``reshape.shape`` when given, else ``dims``."""
    return list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)


def _names(ports: Sequence[Any]) -> str:
    return ", ".join(port.get_any_name() for port in ports) or "(none)"
