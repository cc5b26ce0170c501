"""The backend SDK: everything a naiad backend uses, and the only module it needs to import.

A backend is a plugin whose hooks (:mod:`naiad.hookspecs`) naiad calls for each model of that
backend::

    naiad_backend_info()                        -> BackendInfo (platforms, model files, defaults)
    naiad_backend_initialize(BackendContext)       once, before its first model loads
    naiad_load_model(ModelLoadContext)          -> BackendModel (may complete the config)
    BackendModel.configured(config)                the config is final
    naiad_create_instance(model, InstanceContext) -> ModelInstance (sync or async execute)
    naiad_create_scheduler(model, SchedulerContext) -> Scheduler (optional; naiad's own otherwise)
    naiad_backend_finalize()                       when the server stops

Requests arrive as :class:`InferenceRequest` batches; each is answered through ``request.sender``.
``docs/writing-a-backend.md`` walks through all of it next to Triton's C backend API. The names
below are the public API (pinned by a test); the modules they come from are internal.
"""

from naiad import datatypes
from naiad.backend_info import BackendInfo, Capabilities, ModelFormat, OnDisk
from naiad.backend_model import BackendModel, ModelInstance
from naiad.cancellation import CancellationToken
from naiad.config import config_from_json, config_to_json, config_to_json_dict, fill_load_defaults, parse_model_config
from naiad.contexts import DEFAULT_MAX_BATCH_SIZE, BackendContext, InstanceContext, ModelLoadContext, SchedulerContext
from naiad.devices import gpu_count
from naiad.errors import ErrorCode, NaiadError, invalid_arg, not_found, request_prefix, unavailable, unsupported
from naiad.event_loop import new_event_loop
from naiad.heap import settle as settle_heap
from naiad.hookspecs import hookimpl
from naiad.inference import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    InferenceResponse,
    OutputDestination,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    ResponseSink,
    Scheduling,
    report_compute,
)
from naiad.metrics.custom import Metric, MetricFamily, MetricKind
from naiad.models import ServingModel
from naiad.pipeline import ResponseStage
from naiad.process_exit import describe_exit
from naiad.protocol.model_config_pb2 import (
    DataType,
    ModelConfig,
    ModelInput,
    ModelInstanceGroup,
    ModelOutput,
    ModelParameter,
    ModelSequenceBatching,
)
from naiad.scheduling import build_scheduler
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import InstanceRunner
from naiad.scheduling.sequence_controls import control_datatype
from naiad.server_handle import ServerHandle
from naiad.sinks import BlockingSink, CallbackSink, LoopSink
from naiad.suggestions import SuggestingError, close_matches
from naiad.tensor import MemoryKind, Tensor
from naiad.tensor_instance import Arrays, TensorInstance
from naiad.wire import wire_array

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "SEQUENCE_END",
    "SEQUENCE_START",
    "Arrays",
    "BackendContext",
    "BackendInfo",
    "BackendModel",
    "BlockingSink",
    "CallbackSink",
    "CancellationToken",
    "Capabilities",
    "DataType",
    "ErrorCode",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceContext",
    "InstanceRunner",
    "LoopSink",
    "MemoryKind",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "ModelConfig",
    "ModelFormat",
    "ModelInput",
    "ModelInstance",
    "ModelInstanceGroup",
    "ModelLoadContext",
    "ModelOutput",
    "ModelParameter",
    "ModelSequenceBatching",
    "NaiadError",
    "OnDisk",
    "OutputDestination",
    "ParameterValue",
    "RequestedOutput",
    "ResponseEvent",
    "ResponseSender",
    "ResponseSink",
    "ResponseStage",
    "Scheduler",
    "SchedulerContext",
    "Scheduling",
    "ServerHandle",
    "ServingModel",
    "SuggestingError",
    "Tensor",
    "TensorInstance",
    "build_scheduler",
    "close_matches",
    "config_from_json",
    "config_to_json",
    "config_to_json_dict",
    "control_datatype",
    "datatypes",
    "describe_exit",
    "fill_load_defaults",
    "gpu_count",
    "hookimpl",
    "invalid_arg",
    "new_event_loop",
    "not_found",
    "parse_model_config",
    "report_compute",
    "request_prefix",
    "settle_heap",
    "unavailable",
    "unsupported",
    "wire_array",
]
