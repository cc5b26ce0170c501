"""Completing a model config from the ONNX graph, following Triton's onnxruntime backend.

* A config that lists both inputs (or batch inputs) and outputs is left alone.
* The model can batch when the first dimension of every input and output is variable. Then a
  ``max_batch_size`` of 0 (or none) becomes ``default-max-batch-size`` (naiad reads it from
  ``--backend-config=[onnxruntime,]default-max-batch-size=N``, default 4), and a model with
  ``max_batch_size > 1`` and no scheduler gets ``dynamic_batching {}``. A model that cannot batch
  with a non-zero ``max_batch_size`` fails to load.
* Missing inputs / outputs are filled from the graph in the graph's order: name, datatype and
  dims (without the batch dimension when batching, symbolic dimensions as -1). A tensor left with
  no dims becomes ``dims: [ 1 ]``, plus ``reshape { shape: [ ] }`` when batching.

Whatever the config already says is checked against the model afterwards (:mod:`.checks`).
"""

from __future__ import annotations

import logging

from naiad.backend import DataType, ErrorCode, ModelConfig, ModelInput, ModelOutput, NaiadError
from naiad_onnxruntime.tensors import INVALID, ModelIO, TensorInfo

_log = logging.getLogger("naiad.onnxruntime")


def complete_config(config: ModelConfig, io: ModelIO, default_max_batch_size: int) -> None:
    """Fill ``config`` in place from the model's inputs and outputs (see the module docstring)."""
    has_inputs = len(config.input) + len(config.batch_input) > 0
    has_outputs = len(config.output) > 0
    if has_inputs and has_outputs:
        _log.info(
            "skipping model configuration auto-complete for '%s': inputs and outputs already specified", config.name
        )
        return
    _complete_max_batch_size(config, io, default_max_batch_size)
    batching = config.max_batch_size > 0
    if not has_inputs:
        for info in io.inputs:
            _fill(config.name, config.input.add(), info, batching)
    if not has_outputs:
        for info in io.outputs:
            _fill(config.name, config.output.add(), info, batching)


def can_batch(io: ModelIO) -> bool:
    """Every input and output has a variable first dimension."""
    return all(info.dims and info.dims[0] == -1 for info in (*io.inputs, *io.outputs))


def _complete_max_batch_size(config: ModelConfig, io: ModelIO, default_max_batch_size: int) -> None:
    if not can_batch(io):
        if config.max_batch_size != 0:
            raise NaiadError(
                f"autofill failed for model '{config.name}': model does not support batching while non-zero"
                f" max_batch_size is specified (the first dimension of every input and output must be variable;"
                f" set max_batch_size: 0)",
                ErrorCode.INVALID_ARG,
            )
        return
    if config.max_batch_size == 0:
        config.max_batch_size = max(default_max_batch_size, 0)
        _log.warning(
            "autofilled max_batch_size to %d for model '%s' since batching is supported but no max_batch_size"
            " is specified in model configuration. Must specify max_batch_size to utilize autofill with a larger"
            " max batch size",
            config.max_batch_size,
            config.name,
        )
    if (
        config.max_batch_size > 1
        and not config.HasField("dynamic_batching")
        and not config.HasField("sequence_batching")
    ):
        config.dynamic_batching.SetInParent()


def _fill(model: str, tensor: ModelInput | ModelOutput, info: TensorInfo, batching: bool) -> None:
    if info.config_type == INVALID:
        kind = "input" if isinstance(tensor, ModelInput) else "output"
        raise NaiadError(
            f"autofill failed for model '{model}': {kind} '{info.name}' has ONNX element type"
            f" '{info.element_type}', which has no Triton datatype",
            ErrorCode.UNSUPPORTED,
        )
    tensor.name = info.name
    tensor.data_type = getattr(DataType, info.config_type)
    dims = info.dims[1:] if batching else info.dims
    if dims:
        tensor.dims.extend(dims)
        return
    tensor.dims.append(1)
    if batching:
        tensor.reshape.SetInParent()
