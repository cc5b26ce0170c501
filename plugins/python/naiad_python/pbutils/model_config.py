"""``pb_utils.ModelConfig``: the helper ``auto_complete_config`` receives and returns.

A faithful port of Triton's class (same rules, same ``ValueError`` texts): it wraps the
config JSON as a dict and only lets a model set ``max_batch_size``, add inputs/outputs,
enable dynamic batching and set ``model_transaction_policy.decoupled``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_INPUT_PROPERTIES = ("name", "data_type", "dims", "optional")
_OUTPUT_PROPERTIES = ("name", "data_type", "dims")


class ModelConfig:
    """The model configuration as a dict, with checked setters for auto-complete."""

    __slots__ = ("_model_config",)

    def __init__(self, model_config: str) -> None:
        self._model_config: dict[str, Any] = json.loads(model_config)

    def as_dict(self) -> dict[str, Any]:
        """The configuration dict (always has ``name``, ``max_batch_size``, ``input``, ``output``)."""
        return self._model_config

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set ``max_batch_size``; ValueError if the config already has a larger value."""
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config function "
                f"for model '{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """Use the dynamic batcher unless a sequence batcher or ensemble scheduler is configured."""
        found_scheduler = None
        if "sequence_batching" in self._model_config:
            found_scheduler = "sequence_batching"
        elif "ensemble_scheduling" in self._model_config:
            found_scheduler = "ensemble_scheduling"
        if found_scheduler is not None:
            raise ValueError(
                f"Configuration specified scheduling_choice as '{found_scheduler}', but auto-complete-config "
                f"function for model '{self._name()}' tries to set scheduling_choice as 'dynamic_batching'"
            )
        if "dynamic_batching" not in self._model_config:
            self._model_config["dynamic_batching"] = {}

    def add_input(self, input: Mapping[str, Any]) -> None:
        """Add an input (``name``, ``data_type``, ``dims`` and optionally ``optional``)."""
        self._add_tensor("input", input, _INPUT_PROPERTIES)

    def add_output(self, output: Mapping[str, Any]) -> None:
        """Add an output (``name``, ``data_type``, ``dims``)."""
        self._add_tensor("output", output, _OUTPUT_PROPERTIES)

    def _add_tensor(self, kind: str, tensor: Mapping[str, Any], valid: tuple[str, ...]) -> None:
        model = self._name()
        tensor_name = tensor.get("name")
        for current_property in tensor:
            if current_property not in valid:
                allowed = (
                    "'name', 'data_type', 'dims' and 'optional'"
                    if kind == "input"
                    else ("'name', 'data_type' and 'dims'")
                )
                raise ValueError(
                    f"{kind} '{tensor_name}' in auto-complete-config function for model '{model}' contains "
                    f"property other than {allowed}."
                )
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{model}' is missing 'name' property.")
        for required in ("data_type", "dims"):
            if required not in tensor:
                raise ValueError(
                    f"{kind} '{tensor_name}' in auto-complete-config function for model '{model}' is missing "
                    f"'{required}' property."
                )
        existing_list: list[dict[str, Any]] = self._model_config.setdefault(kind, [])
        for current in existing_list:
            if current.get("name") != tensor_name:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type != "TYPE_INVALID" and current_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{model}', configuration expects datatype {current_type} for "
                    f"{kind} '{tensor_name}', model provides {tensor['data_type']}"
                )
            current_dims = current.get("dims") or []
            if current_dims and current_dims != tensor["dims"]:
                raise ValueError(
                    f"model '{model}', tensor '{tensor_name}': the model expects dims {tensor['dims']} "
                    f"but the model configuration specifies dims {current_dims}"
                )
            if (
                kind == "input"
                and "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{model}', tensor '{tensor_name}': the model expects optional "
                    f"{tensor['optional']} but the model configuration specifies optional "
                    f"{current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        existing_list.append(dict(tensor))

    def set_model_transaction_policy(self, transaction_policy_dict: Mapping[str, Any]) -> None:
        """Set ``model_transaction_policy`` (only the ``decoupled`` key)."""
        model = self._name()
        for current_property in transaction_policy_dict:
            if current_property != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{model}' contains property other than 'decoupled'."
                )
        policy: dict[str, Any] = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            if "decoupled" in policy and policy["decoupled"] != transaction_policy_dict["decoupled"]:
                raise ValueError(
                    f"trying to change decoupled property in auto-complete-config for model '{model}', which "
                    f"is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = transaction_policy_dict["decoupled"]
