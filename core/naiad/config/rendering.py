"""Triton's JSON rendering of a ``ModelConfig`` (``GET .../config``, Python ``args["model_config"]``).

Matches Triton 2.51 (protocol-http.md §6), checked against a real server:

* proto field names, declaration order, enum values by name;
* every non-message field of a present message is printed, even when default;
  unset sub-messages and unset oneof members are omitted; set scalar oneof
  members come after the other fields (``initial_state[]``: ``name`` before
  ``zero_data``), as in Triton;
* 64-bit integers are JSON strings (protobuf's JSON mapping) except on the
  paths Triton converts back to numbers (:data:`_INT64_AS_NUMBER`); the
  others (``optimization.cuda.graph_spec[].input.*.dim``,
  ``instance_group[].secondary_devices[].device_id``, ...) stay strings, as
  in Triton. Map keys are always strings;
* floats are printed in their shortest form, integral ones as integers
  (``[0, 1]``, as Triton's ``0``/``1`` parse in Python);
* map entries sorted by key (numerically for integer keys); Triton's order is
  that of its hash maps, i.e. arbitrary;
* fields Triton 2.51's schema lacks (``ensemble_scheduling.max_inflight_requests``)
  are printed only when set.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from naiad.protocol.model_config_pb2 import ModelConfig

__all__ = ["config_to_json", "config_to_json_dict", "message_to_json_dict"]

_INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)

# Fields newer than Triton 2.51's schema: printed only when set, so a default config renders as 2.51's.
_NEWER_THAN_2_51 = frozenset({"inference.ModelEnsembling.max_inflight_requests"})

# Full names of the 64-bit fields Triton renders as JSON numbers (``ModelConfigToJson``).
_INT64_AS_NUMBER = frozenset(
    {
        "inference.ModelInput.dims",
        "inference.ModelOutput.dims",
        "inference.ModelTensorReshape.shape",
        "inference.ModelVersionPolicy.Specific.versions",
        "inference.ModelDynamicBatching.max_queue_delay_microseconds",
        "inference.ModelDynamicBatching.priority_levels",
        "inference.ModelDynamicBatching.default_priority_level",
        "inference.ModelQueuePolicy.default_timeout_microseconds",
        "inference.ModelSequenceBatching.max_sequence_idle_microseconds",
        "inference.ModelSequenceBatching.StrategyDirect.max_queue_delay_microseconds",
        "inference.ModelSequenceBatching.StrategyOldest.max_queue_delay_microseconds",
        "inference.ModelSequenceBatching.State.dims",
        "inference.ModelEnsembling.Step.model_version",
        "inference.ModelWarmup.Input.dims",
    }
)


def config_to_json_dict(config: ModelConfig) -> dict[str, Any]:
    """Render *config* as Triton does, as a JSON-ready dict (see the module docstring)."""
    return message_to_json_dict(config)


def config_to_json(config: ModelConfig) -> str:
    """Render *config* as Triton's compact JSON text (``/v2/models/{m}/config`` body)."""
    return json.dumps(config_to_json_dict(config), separators=(",", ":"), ensure_ascii=False)


def message_to_json_dict(message: Message) -> dict[str, Any]:
    """Render any message of the model-config schema with Triton's rules."""
    out: dict[str, Any] = {}
    descriptor = message.DESCRIPTOR
    oneof_scalars: list[FieldDescriptor] = []
    for field in descriptor.fields:
        value = getattr(message, field.name)
        if field.containing_oneof is not None and field.message_type is None:
            oneof_scalars.append(field)  # Triton prints these after the other fields
        elif _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {_map_key(k): _scalar_or_message(value_field, value[k]) for k in sorted(value)}
        elif field.is_repeated:
            out[field.name] = [_scalar_or_message(field, v) for v in value]
        elif field.message_type is not None:
            if message.HasField(field.name):
                out[field.name] = _scalar_or_message(field, value)
        elif field.full_name not in _NEWER_THAN_2_51 or value:
            out[field.name] = _scalar_or_message(field, value)
    for field in oneof_scalars:
        if message.HasField(field.name):
            out[field.name] = _scalar_or_message(field, getattr(message, field.name))
    return out


def _map_key(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _is_map(field: FieldDescriptor) -> bool:
    return field.is_repeated and field.message_type is not None and field.message_type.GetOptions().map_entry


def _scalar_or_message(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        return message_to_json_dict(value)
    if field.enum_type is not None:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    if field.type in _INT64_TYPES:
        return int(value) if field.full_name in _INT64_AS_NUMBER else str(value)
    if field.type == FieldDescriptor.TYPE_FLOAT:
        return _json_float(value, single=True)
    if field.type == FieldDescriptor.TYPE_DOUBLE:
        return _json_float(value, single=False)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def _json_float(value: float, *, single: bool) -> float | int | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if single:
        value = _shortest_float32(value)
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _shortest_float32(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (``0.1f`` → ``0.1``)."""
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack("<f", candidate) == packed:
            return candidate
    return value
