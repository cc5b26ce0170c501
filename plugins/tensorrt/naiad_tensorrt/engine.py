"""Deserializing a plan and describing the ``trt.ICudaEngine`` (TensorRT 10's name-based tensor API)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from naiad.backend import NaiadError
from naiad_tensorrt.description import EngineDescription, EngineTensor, ProfileShape

_log = logging.getLogger("naiad.tensorrt")
_runtimes: dict[int, Any] = {}  # device -> trt.Runtime
_loggers: list[Any] = []  # the one logger every runtime shares (TensorRT keeps the first it is given)
_lock = threading.Lock()


def _logger(trt: Any) -> Any:
    """TensorRT's messages at WARNING and above, into naiad's log."""

    class _Logger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.last_error = ""

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR):
                self.last_error = msg
                _log.error("TensorRT: %s", msg)
            elif severity == trt.ILogger.WARNING:
                _log.warning("TensorRT: %s", msg)

    return _Logger()


def deserialize(trt: Any, path: Path, device_id: int, model: str) -> Any:
    """The engine in ``path``, deserialized on the current device (the caller has selected ``device_id``)."""
    with _lock:
        if not _loggers:
            _loggers.append(_logger(trt))
        logger = _loggers[0]
        runtime = _runtimes.get(device_id)
        if runtime is None:
            runtime = _runtimes[device_id] = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(path.read_bytes())
    if engine is None:
        reason = logger.last_error or "no reason given"
        raise NaiadError(
            f"model '{model}': TensorRT {trt.__version__} could not deserialize '{path}' on GPU {device_id}:"
            f" {reason}. A plan runs only with the TensorRT version and GPU architecture it was built for;"
            " rebuild it on this machine (naiad-tensorrt build model.onnx -o model.plan)"
        )
    return engine


def describe(trt: Any, engine: Any) -> EngineDescription:
    """The engine's I/O tensors and every profile's input shapes."""
    names = [engine.get_tensor_name(index) for index in range(engine.num_io_tensors)]
    tensors = tuple(
        EngineTensor(
            name=name,
            is_input=engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT,
            trt_type=engine.get_tensor_dtype(name).name,
            shape=tuple(int(dim) for dim in engine.get_tensor_shape(name)),
            is_shape_tensor=bool(engine.is_shape_inference_io(name)),
            linear_format=engine.get_tensor_format(name) == trt.TensorFormat.LINEAR,
        )
        for name in names
    )
    profiles = []
    for profile in range(engine.num_optimization_profiles):
        shapes = {}
        for tensor in tensors:
            if tensor.is_input and tensor.dynamic and not tensor.is_shape_tensor:
                low, best, high = engine.get_tensor_profile_shape(tensor.name, profile)
                shapes[tensor.name] = ProfileShape(_dims(low), _dims(best), _dims(high))
        profiles.append(shapes)
    return EngineDescription(tensors, tuple(profiles), bool(getattr(engine, "has_implicit_batch_dimension", False)))


def _dims(dims: Any) -> tuple[int, ...]:
    return tuple(int(dim) for dim in dims)
