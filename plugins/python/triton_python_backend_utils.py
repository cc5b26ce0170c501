"""naiad's ``triton_python_backend_utils``: what ``import triton_python_backend_utils as pb_utils`` gives.

The same names, signatures and behaviour as Triton's module (python-model-api.md §4), with
the implementation in :mod:`naiad_python.pbutils` (BLS: :mod:`naiad_python.bls`). Like Triton's, the
module also holds the ``json``, ``struct`` and numpy (``np``) modules it imports, which some models
reach through it (``pb_utils.np``).

``get_model_dir()`` (and the legacy ``ModelPath``), model control (``load_model``,
``unload_model``, ``is_model_ready``) and custom metrics (``MetricFamily``) act for the model
whose code calls them, even when several models share the process.
"""

from __future__ import annotations

import json
import struct

import numpy as np

from naiad_python.pbutils.caller import calling_unit as _calling_unit
from naiad_python.pbutils.errors import TritonError, TritonModelException
from naiad_python.pbutils.logger import Logger
from naiad_python.pbutils.lookup import (
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_output_config_by_name,
    get_output_tensor_by_name,
    using_decoupled_model_transaction_policy,
)
from naiad_python.pbutils.metrics import MetricFamily
from naiad_python.pbutils.model_config import ModelConfig
from naiad_python.pbutils.model_control import is_model_ready, load_model, unload_model
from naiad_python.pbutils.request import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    InferenceRequest,
    InferenceTrace,
    MemoryType,
    PreferredMemory,
)
from naiad_python.pbutils.response import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceResponse,
    InferenceResponseSender,
)
from naiad_python.pbutils.tensor import Tensor
from naiad_python.pbutils.types import (
    TRITON_STRING_TO_NUMPY,
    deserialize_bytes_tensor,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
)

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "MemoryType",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "json",
    "load_model",
    "np",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "struct",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]


def get_model_dir() -> str:
    """The directory holding the calling model's ``model.py`` (its version directory)."""
    return str(_calling_unit("get_model_dir()").version_dir)


def __getattr__(name: str) -> str:
    # ``ModelPath``: the path of the calling model's model.py, which older Triton models read.
    if name == "ModelPath":
        return str(_calling_unit("get_model_dir()").model_file)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
