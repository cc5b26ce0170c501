"""Completing a model config from the OpenVINO model's inputs and outputs (auto-complete).

Rules (Triton's openvino backend, plus naiad's first-dimension rule for models without
layout information, such as most ONNX files):

* the model batches when every input and output has a batch dimension first: either its
  layout says so (``N`` at index 0, Triton's rule) or its first dimension is dynamic;
  inputs/outputs already listed in config.pbtxt must then list dims without that dimension;
* a batching model with ``max_batch_size: 0`` (or none) gets
  ``ModelLoadContext.default_max_batch_size`` (``--backend-config=[openvino,]default-max-batch-size``,
  default 4), and ``dynamic_batching {}`` when that is > 1 and no scheduler is configured;
* an empty ``input`` / ``output`` section is filled from the model (name, datatype, dims
  with ``-1`` for dynamic dimensions, batch dimension left out when batching); a non-empty
  one is kept, only its missing ``data_type`` / ``dims`` are filled by name.

Conflicts between what config.pbtxt says and the model are reported once the config is
final (:mod:`naiad_openvino.prepare`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from naiad.backend import ModelConfig, ModelInput, ModelOutput, invalid_arg
from naiad_openvino import elements, shapes

logger = logging.getLogger("naiad.openvino")


def auto_complete(config: ModelConfig, ov_model: Any, default_max_batch_size: int, source: str) -> None:
    """Complete ``config`` in place from ``ov_model`` (read from ``source``)."""
    inputs, outputs = list(ov_model.inputs), list(ov_model.outputs)
    if config.max_batch_size == 0 and _batchable(config, inputs, outputs):
        config.max_batch_size = max(default_max_batch_size, 1)
        logger.warning(
            "autofilled max_batch_size to %d for model '%s' since batching is supported but no "
            "max_batch_size is specified in model configuration. Must specify max_batch_size to "
            "utilize autofill with a larger max batch size",
            config.max_batch_size,
            config.name,
        )
    scheduled = config.HasField("dynamic_batching") or config.HasField("sequence_batching")
    if config.max_batch_size > 1 and not scheduled:
        config.dynamic_batching.SetInParent()
    batching = config.max_batch_size > 0
    _complete_tensors(config, config.input, inputs, batching, "input", source)
    _complete_tensors(config, config.output, outputs, batching, "output", source)


def _batchable(config: ModelConfig, inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    ports = [*inputs, *outputs]
    if not ports or not all(_has_batch_dimension(port) for port in ports):
        return False
    # Dims already written in config.pbtxt must leave the batch dimension out.
    ranks = {name: len(port.get_partial_shape()) for port in ports for name in port.get_names()}
    tensors: list[ModelInput | ModelOutput] = [*config.input, *config.output]
    for tensor in tensors:
        rank = ranks.get(tensor.name)
        if rank is not None and tensor.dims and not tensor.HasField("reshape") and len(tensor.dims) != rank - 1:
            return False
    return True


def _has_batch_dimension(port: Any) -> bool:
    import openvino as ov

    shape = port.get_partial_shape()
    if shape.rank.is_dynamic or len(shape) == 0:
        return False
    layout = ov.layout_helpers.get_layout(port)
    if ov.layout_helpers.has_batch(layout) and ov.layout_helpers.batch_idx(layout) in (0, -len(shape)):
        return True
    return bool(shape[0].is_dynamic)


def _complete_tensors(
    config: ModelConfig,
    tensors: Any,
    ports: Iterable[Any],
    batching: bool,
    kind: str,
    source: str,
) -> None:
    by_name = {name: port for port in ports for name in port.get_names()}
    if len(tensors) == 0:
        for port in ports:
            tensor: ModelInput | ModelOutput = tensors.add(name=port.get_any_name())
            _fill(config, tensor, port, batching, kind, source)
        return
    for tensor in tensors:
        found = by_name.get(tensor.name)
        if found is not None and (tensor.data_type == 0 or not tensor.dims):
            _fill(config, tensor, found, batching, kind, source)


def _fill(
    config: ModelConfig, tensor: ModelInput | ModelOutput, port: Any, batching: bool, kind: str, source: str
) -> None:
    where = f"model '{config.name}' (file '{source}'): cannot auto-complete {kind} '{tensor.name}'"
    if tensor.data_type == 0:
        data_type = elements.config_type_of(port.get_element_type())
        if data_type is None:
            raise invalid_arg(
                f"{where}: OpenVINO element type {elements.ov_type_label(port.get_element_type())} has no "
                "datatype the openvino backend supports"
            )
        tensor.data_type = data_type  # type: ignore[assignment]
    if not tensor.dims:
        shape = port.get_partial_shape()
        if shape.rank.is_dynamic:
            raise invalid_arg(f"{where}: its rank is dynamic; list it in config.pbtxt with its dims")
        dims = shapes.to_dims(shape)[1 if batching else 0 :]
        if not dims:
            raise invalid_arg(
                f"{where}: it is a scalar, which the openvino backend does not support (as in Triton); "
                "export the model with a shape of at least one dimension"
            )
        tensor.dims.extend(dims)
