"""Checking a (completed) config against the ONNX model, with Triton's onnxruntime messages.

Runs on every load, with or without auto-complete: the number of inputs, and for each configured
input and output its name, datatype and dims (``reshape`` when given). Model dimensions that are
variable accept any configured size for inputs; outputs must match exactly, as in Triton.
"""

from __future__ import annotations

from collections.abc import Sequence

from naiad.backend import (
    DataType,
    ErrorCode,
    ModelConfig,
    ModelInput,
    ModelOutput,
    NaiadError,
    SuggestingError,
    close_matches,
    control_datatype,
)
from naiad_onnxruntime.tensors import ONNX_TO_CONFIG, ModelIO, TensorInfo, shape_text


def check_config(config: ModelConfig, io: ModelIO, model_file: str) -> None:
    """INVALID_ARG when ``config`` does not describe the model in ``model_file``."""
    checker = _Checker(config, io, model_file)
    checker.input_count()
    for model_input in config.input:
        checker.input(model_input)
    batch_outputs = {name for batch_output in config.batch_output for name in batch_output.target_name}
    for model_output in config.output:
        checker.output(model_output, model_output.name in batch_outputs)
    checker.sequence_controls()
    checker.states()


class _Checker:
    def __init__(self, config: ModelConfig, io: ModelIO, model_file: str) -> None:
        self.config = config
        self.io = io
        self.name = config.name
        self.model_file = model_file

    def fail(self, message: str) -> NaiadError:
        return NaiadError(f"{message} (model file '{self.model_file}')", ErrorCode.INVALID_ARG)

    def unknown(self, message: str, name: str, allowed: list[str]) -> SuggestingError:
        """:meth:`fail` for a tensor the model does not have, with the names it may mean (``naiad check``)."""
        return SuggestingError(
            f"{message} (model file '{self.model_file}')", name=name, suggestions=close_matches(name, allowed)
        )

    def input_count(self) -> None:
        expected = sum(1 for model_input in self.config.input if not model_input.optional)
        expected += len(self.config.batch_input)
        if self.config.HasField("sequence_batching"):
            sequence = self.config.sequence_batching
            expected += len(sequence.control_input) + len(sequence.state)
        if len(self.io.inputs) != expected:
            raise self.fail(
                f"unable to load model '{self.name}', configuration expects {expected} inputs,"
                f" model provides {len(self.io.inputs)}"
            )

    def input(self, model_input: ModelInput) -> None:
        name = model_input.name
        if model_input.optional and self.config.max_batch_size != 0:
            raise self.fail(
                f"unable to load model '{self.name}', optional input '{name}' is not supported for models"
                " that support batching"
            )
        info = self.io.input(name)
        if info is None:
            allowed = sorted(t.name for t in (*self.io.inputs, *self.io.initializers))
            raise self.unknown(
                f"unable to load model '{self.name}', unexpected inference input '{name}',"
                f" allowed inputs are: {', '.join(allowed)}",
                name,
                allowed,
            )
        self.datatype("input", name, model_input.data_type, info)
        dims = list(model_input.reshape.shape if model_input.HasField("reshape") else model_input.dims)
        if model_input.allow_ragged_batch:
            if model_input.optional:
                raise self.fail(
                    f"unable to load model '{self.name}', configuration expects model provides input with shape"
                    f" [-1] for ragged input '{name}', which is not supported for optional input"
                )
            if info.dims != (-1,):
                raise self.fail(
                    f"unable to load model '{self.name}', configuration expects model provides input with shape"
                    f" [-1] for ragged input '{name}', model provides {shape_text(info.dims)}"
                )
            return
        self.dims(info, dims, exact=False)

    def output(self, model_output: ModelOutput, is_batch_output: bool) -> None:
        name = model_output.name
        info = self.io.output(name)
        if info is None:
            allowed = sorted(t.name for t in self.io.outputs)
            raise self.unknown(
                f"unable to load model '{self.name}', unexpected inference output '{name}',"
                f" allowed outputs are: {', '.join(allowed)}",
                name,
                allowed,
            )
        self.datatype("output", name, model_output.data_type, info)
        if not is_batch_output:
            dims = list(model_output.reshape.shape if model_output.HasField("reshape") else model_output.dims)
            self.dims(info, dims, exact=True)

    def datatype(self, kind: str, name: str, data_type: int, info: TensorInfo) -> None:
        configured = DataType.Name(data_type)
        if configured not in ONNX_TO_CONFIG.values():
            raise NaiadError(
                f"unsupported datatype {configured} for {kind} '{name}' for model '{self.name}'", ErrorCode.INTERNAL
            )
        if configured != info.config_type:
            raise self.fail(
                f"unable to load model '{self.name}', configuration expects datatype {configured} for {kind}"
                f" '{name}', model provides {info.config_type}"
            )

    def dims(self, info: TensorInfo, dims: Sequence[int], *, exact: bool) -> None:
        """Triton's ``CompareDimsSupported``; a scalar model tensor takes only 1s."""
        if not info.dims:
            if any(dim != 1 for dim in dims):
                raise self.fail(
                    f"unable to load model '{self.name}', scalar tensor '{info.name}', should only provide 1 in the"
                    f" model configuration when the model doesn't support batching. Model configuration provided:"
                    f" {shape_text(dims)}."
                )
            return
        batching = self.config.max_batch_size > 0
        full = [-1, *dims] if batching else list(dims)
        if batching and info.dims[0] != -1:
            raise self.fail(
                f"model '{self.name}', tensor '{info.name}': for the model to support batching the shape should have"
                f" at least 1 dimension and the first dimension must be -1; but shape expected by the model is"
                f" {shape_text(info.dims)}"
            )
        same = len(info.dims) == len(full) and all(
            model_dim == dim for model_dim, dim in zip(info.dims, full, strict=True) if exact or model_dim != -1
        )
        if same:
            return
        if batching:
            detail = (
                f"{len(full)} dimensions (an initial batch dimension because max_batch_size > 0 followed by the"
                f" explicit tensor shape, making complete shape {shape_text(full)})"
            )
        else:
            detail = f"{len(full)} dimensions (shape {shape_text(full)})"
        raise self.fail(
            f"model '{self.name}', tensor '{info.name}': the model expects {len(info.dims)} dimensions"
            f" (shape {shape_text(info.dims)}) but the model configuration specifies {detail}"
        )

    def states(self) -> None:
        """Implicit-state outputs must be model outputs of the state's datatype (Triton checks no more)."""
        for state in self.config.sequence_batching.state:
            info = self.io.output(state.output_name)
            if info is None:
                allowed = sorted(t.name for t in self.io.outputs)
                raise self.fail(
                    f"unable to load model '{self.name}', unexpected inference output '{state.output_name}',"
                    f" allowed outputs are: {', '.join(allowed)}"
                )
            configured = DataType.Name(state.data_type)
            if configured != info.config_type:
                raise self.fail(
                    f"unable to load model '{self.name}', configuration expects datatype {configured} for output"
                    f" state '{state.output_name}', model provides {info.config_type}"
                )

    def sequence_controls(self) -> None:
        """Sequence control tensors must be model inputs of dims [1] with the control's datatype."""
        if not self.config.HasField("sequence_batching"):
            return
        for control_input in self.config.sequence_batching.control_input:
            info = self.io.input(control_input.name)
            if info is None:
                raise NaiadError(
                    f"configuration specified sequence control '{control_input.name}', but model does not provide"
                    f" that input (model '{self.name}', model file '{self.model_file}')",
                    ErrorCode.INTERNAL,
                )
            dims = info.dims[1:] if self.config.max_batch_size > 0 else info.dims
            if dims != (1,):
                raise self.fail(
                    f"unable to load model '{self.name}', sequence control '{info.name}' in model has dims"
                    f" {shape_text(dims)} but dims [1] is expected"
                )
            number = control_datatype(control_input)
            expected = DataType.Name(number)
            if number != DataType.TYPE_INVALID and expected != info.config_type:
                raise self.fail(
                    f"unable to load model '{self.name}', sequence control '{info.name}', the model expects"
                    f" data-type {info.config_type} but the model configuration specifies data-type {expected}"
                )
