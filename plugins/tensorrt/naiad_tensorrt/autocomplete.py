"""Completing a model config from a TensorRT engine, following Triton's tensorrt backend.

* ``max_batch_size`` the engine supports: over the profiles the instance groups list (profile 0 when
  none), the largest of each profile's smallest maximum first dimension among its inputs. A config
  whose inputs/outputs have one dimension fewer than the engine's tensors hints at batching; dims of
  the engine's full rank hint at no batching (``max_batch_size`` 0).
* ``max_batch_size`` 0 (or none) becomes what the engine supports; a larger configured one fails.
  ``max_batch_size > 1`` with no scheduler adds ``dynamic_batching { }``.
* Missing inputs / outputs are filled in the engine's order with name, datatype and dims (the batch
  dimension dropped when batching); a tensor left with no dims gets ``dims: [ 1 ]`` and
  ``reshape { shape: [ ] }``. Listed tensors without a datatype or dims get the engine's.

Whatever the config says afterwards is checked against the engine by :mod:`.checks`.
"""

from __future__ import annotations

import logging

from naiad.backend import DataType, ErrorCode, ModelConfig, ModelInput, ModelOutput, NaiadError
from naiad_tensorrt.description import INVALID, EngineDescription, EngineTensor
from naiad_tensorrt.profiles import model_profiles

_log = logging.getLogger("naiad.tensorrt")


def supported_max_batch_size(engine: EngineDescription, profiles: list[int]) -> int:
    """The largest batch the engine takes on ``profiles`` (0: it cannot batch)."""
    if engine.implicit_batch or any(not t.shape for t in engine.inputs) or not engine.inputs:
        return 0
    best = 0
    for profile in profiles:
        largest = min(engine.profile_shape(profile, t.name).max[0] for t in engine.inputs)
        best = max(best, largest)
    return best


def complete_config(config: ModelConfig, engine: EngineDescription) -> None:
    """Fill ``config`` in place from ``engine`` (see the module docstring)."""
    hint = _batch_hint(config, engine)
    supported = supported_max_batch_size(engine, model_profiles(config, len(engine.profiles)))
    if hint is True and supported == 0:
        raise _fail(
            config,
            "model tensor shape configuration hints for dynamic batching but the underlying engine doesn't"
            " support batching",
        )
    if hint is False:
        _log.warning("the specified dimensions in model config for '%s' hint that batching is unavailable", config.name)
        supported = 0
    if config.max_batch_size == 0:
        config.max_batch_size = supported
    elif config.max_batch_size > supported:
        raise _fail(
            config,
            f"configuration specified max-batch {config.max_batch_size} but TensorRT engine only supports"
            f" max-batch {supported}",
        )
    if (
        config.max_batch_size > 1
        and not config.HasField("dynamic_batching")
        and not config.HasField("sequence_batching")
    ):
        config.dynamic_batching.SetInParent()
    batching = config.max_batch_size > 0
    if len(config.input) == 0:
        for tensor in engine.inputs:
            _fill(config, config.input.add(), tensor, batching)
    if len(config.output) == 0:
        for tensor in engine.outputs:
            _fill(config, config.output.add(), tensor, batching)
    listed: list[ModelInput | ModelOutput] = [*config.input, *config.output]
    for item in listed:
        found = engine.input(item.name) if isinstance(item, ModelInput) else engine.output(item.name)
        if found is not None:
            _fill(config, item, found, batching)


def _batch_hint(config: ModelConfig, engine: EngineDescription) -> bool | None:
    """True/False when the configured dims say the model batches / does not; None when they say nothing."""
    hint: bool | None = None
    listed: list[ModelInput | ModelOutput] = [*config.input, *config.output]
    for tensor in listed:
        if isinstance(tensor, ModelInput) and tensor.allow_ragged_batch:
            return True
        dims = list(tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims)
        found = engine.input(tensor.name) or engine.output(tensor.name)
        if not dims or found is None:
            continue
        batches = len(found.shape) == len(dims) + 1
        if hint is not None and hint != batches:
            raise _fail(
                config,
                f"model tensor configurations are contradicting each other in terms of whether batching is"
                f" supported (tensor '{tensor.name}' has {len(dims)} dims in the config and"
                f" {len(found.shape)} in the engine)",
            )
        hint = batches
    return hint


def _fill(config: ModelConfig, item: ModelInput | ModelOutput, tensor: EngineTensor, batching: bool) -> None:
    if tensor.config_type == INVALID:
        kind = "input" if tensor.is_input else "output"
        raise NaiadError(
            f"autofill failed for model '{config.name}': {kind} '{tensor.name}' has TensorRT datatype"
            f" {tensor.trt_type}, which has no Triton datatype",
            ErrorCode.UNSUPPORTED,
        )
    item.name = tensor.name
    if item.data_type == DataType.TYPE_INVALID:
        item.data_type = getattr(DataType, tensor.config_type)
    if len(item.dims) or item.HasField("reshape"):
        return
    dims = tensor.shape[1:] if batching else tensor.shape
    if dims:
        item.dims.extend(dims)
    else:
        item.dims.append(1)
        item.reshape.SetInParent()


def _fail(config: ModelConfig, message: str) -> NaiadError:
    return NaiadError(f"autofill failed for model '{config.name}': {message}", ErrorCode.INVALID_ARG)
