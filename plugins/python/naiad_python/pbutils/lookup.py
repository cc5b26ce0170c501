"""The ``get_*_by_name`` helpers and the decoupled-policy check, as Triton defines them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from naiad_python.pbutils.tensor import Tensor


class _HasInputs(Protocol):
    def inputs(self) -> list[Tensor]: ...


class _HasOutputs(Protocol):
    def output_tensors(self) -> list[Tensor]: ...


def get_input_tensor_by_name(inference_request: _HasInputs, name: str) -> Tensor | None:
    """The first input tensor called ``name``, or ``None`` (how optional inputs are detected)."""
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: _HasOutputs, name: str) -> Tensor | None:
    """The first output tensor called ``name`` of a response, or ``None``."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The ``input`` entry of a config dict with that name, or ``None``."""
    for properties in model_config.get("input", []):
        if properties["name"] == name:
            return properties  # type: ignore[no-any-return]
    return None


def get_output_config_by_name(model_config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The ``output`` entry of a config dict with that name, or ``None``."""
    for properties in model_config.get("output", []):
        if properties["name"] == name:
            return properties  # type: ignore[no-any-return]
    return None


def using_decoupled_model_transaction_policy(model_config: Mapping[str, Any]) -> bool:
    """``model_config["model_transaction_policy"]["decoupled"]`` if present, else False."""
    if "model_transaction_policy" in model_config:
        return bool(model_config["model_transaction_policy"].get("decoupled", False))
    return False
