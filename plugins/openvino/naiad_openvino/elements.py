"""OpenVINO element types and Triton config datatypes, in both directions.

The set is Triton's openvino backend's (BOOL, UINT8..64, INT8..64, FP16, FP32) plus FP64,
which OpenVINO supports as well. BYTES/TYPE_STRING and BF16 have no numpy-compatible
OpenVINO tensor in naiad and are rejected with an error naming the tensor.
"""

from __future__ import annotations

from typing import Any

from naiad.backend import DataType

# OpenVINO type name (``ov.Type.get_type_name()``) -> config enum name.
_CONFIG_BY_OV_NAME = {
    "boolean": "TYPE_BOOL",
    "u8": "TYPE_UINT8",
    "u16": "TYPE_UINT16",
    "u32": "TYPE_UINT32",
    "u64": "TYPE_UINT64",
    "i8": "TYPE_INT8",
    "i16": "TYPE_INT16",
    "i32": "TYPE_INT32",
    "i64": "TYPE_INT64",
    "f16": "TYPE_FP16",
    "f32": "TYPE_FP32",
    "f64": "TYPE_FP64",
}
_OV_NAME_BY_CONFIG = {config: ov_name for ov_name, config in _CONFIG_BY_OV_NAME.items()}


def config_type_of(element_type: Any) -> int | None:
    """The ``inference.DataType`` number for an ``ov.Type``; None when Triton has no equivalent."""
    name = _CONFIG_BY_OV_NAME.get(element_type.get_type_name())
    return None if name is None else DataType.Value(name)


def ov_type_of(data_type: int) -> Any | None:
    """The ``ov.Type`` for a config datatype number; None when OpenVINO cannot take it."""
    import openvino as ov

    ov_name = _OV_NAME_BY_CONFIG.get(config_type_name(data_type))
    return None if ov_name is None else getattr(ov.Type, ov_name)


def config_type_name(data_type: int) -> str:
    """``TYPE_FP32`` for 11; the number itself for values outside the enum."""
    try:
        return DataType.Name(data_type)
    except ValueError:
        return str(data_type)


def ov_type_label(element_type: Any) -> str:
    """A short label for error messages, e.g. ``f32``."""
    return str(element_type.get_type_name())
