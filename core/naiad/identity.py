"""The ``identity`` backend: every output is the input at the same position of the config.

Built into naiad (as Triton ships one for its tests) so the server, its frontends and its
schedulers can be exercised without any framework installed. A model needs no file: a version
folder and a config whose inputs and outputs pair up by position with equal datatypes and shapes
(each tensor's ``reshape`` when it has one, else its ``dims``: the shape the backend sees)::

    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
    parameters { key: "execute_delay_ms" value: { string_value: "10" } }

``execute_delay_ms`` makes every execution sleep that long, like a model that computes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy.typing as npt

from naiad.backend_info import BackendInfo
from naiad.backend_model import BackendModel, ModelInstance
from naiad.contexts import InstanceContext, ModelLoadContext
from naiad.errors import invalid_arg
from naiad.hookspecs import hookimpl
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInput, ModelOutput
from naiad.tensor_instance import Arrays, TensorInstance

DELAY_PARAMETER = "execute_delay_ms"


class IdentityModel(BackendModel):
    """The checked pairing of inputs to outputs, and the delay."""

    def __init__(self, config: ModelConfig) -> None:
        if len(config.input) != len(config.output):
            raise invalid_arg(
                f"identity model '{config.name}' has {len(config.input)} inputs and {len(config.output)} outputs; "
                "it needs one output per input, in the same order"
            )
        for model_input, model_output in zip(config.input, config.output, strict=True):
            if model_input.data_type != model_output.data_type or _shape(model_input) != _shape(model_output):
                raise invalid_arg(
                    f"identity model '{config.name}': output '{model_output.name}' must have the datatype and dims "
                    f"of input '{model_input.name}'"
                )
        self.pairs = {i.name: o.name for i, o in zip(config.input, config.output, strict=True)}
        self.delay_s = _delay_ms(config) / 1000


class IdentityInstance(TensorInstance):
    """Returns each input as its paired output."""

    def __init__(self, model: IdentityModel, config: ModelConfig) -> None:
        super().__init__(config)
        self._pairs = model.pairs
        self._delay_s = model.delay_s

    def run(self, inputs: Arrays) -> Mapping[str, npt.NDArray[Any]]:
        if self._delay_s:
            time.sleep(self._delay_s)
        return {self._pairs[name]: array for name, array in inputs.items() if name in self._pairs}


def _shape(tensor: ModelInput | ModelOutput) -> list[int]:
    """The shape the backend sees: the ``reshape`` when given (Triton's identity backend compares these)."""
    return list(tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims)


def _delay_ms(config: ModelConfig) -> float:
    parameter = config.parameters.get(DELAY_PARAMETER)
    if parameter is None:
        return 0.0
    try:
        delay = float(parameter.string_value)
    except ValueError:
        delay = -1.0
    if delay < 0:
        raise invalid_arg(
            f"identity model '{config.name}': parameter {DELAY_PARAMETER} is '{parameter.string_value}'; "
            "give a number of milliseconds >= 0"
        )
    return delay


@hookimpl
def naiad_backend_info() -> BackendInfo:
    return BackendInfo("identity")


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> IdentityModel:
    return IdentityModel(context.config)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    if not isinstance(model, IdentityModel):
        return None
    return IdentityInstance(model, context.config)
