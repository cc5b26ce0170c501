"""Loading one TensorRT plan and creating its instances.

The load checks the host (a CUDA device, TensorRT, cuda-python) before anything else, so a machine
without a GPU fails only this model, with that reason. The plan is deserialized once per GPU; the
engine on the first GPU the instance groups name describes the model, completes the config when
asked and is checked against it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from naiad.backend import (
    BackendModel,
    ErrorCode,
    InstanceContext,
    ModelConfig,
    ModelLoadContext,
    NaiadError,
)
from naiad_tensorrt import engine as engines
from naiad_tensorrt.autocomplete import complete_config
from naiad_tensorrt.checks import check_config
from naiad_tensorrt.cuda import Cuda
from naiad_tensorrt.description import EngineDescription
from naiad_tensorrt.environment import import_tensorrt, require_gpu
from naiad_tensorrt.graphs import graph_specs
from naiad_tensorrt.instance import TrtInstance
from naiad_tensorrt.profiles import instance_profiles

DEFAULT_MODEL_FILENAME = "model.plan"

_log = logging.getLogger("naiad.tensorrt")


def plan_path(context: ModelLoadContext) -> Path:
    """``<version>/<default_model_filename>``; UNAVAILABLE naming the path when it is missing."""
    path = context.version_dir / (context.config.default_model_filename or DEFAULT_MODEL_FILENAME)
    if not path.is_file():
        raise NaiadError(
            f"unable to find '{path}' for model '{context.model_name}': put the TensorRT plan there, or name it"
            " with default_model_filename in config.pbtxt",
            ErrorCode.UNAVAILABLE,
        )
    return path


class TrtModel(BackendModel):
    """A loaded plan: its file, the engine per GPU and its description."""

    def __init__(self, name: str, path: Path, trt: Any, description: EngineDescription, engines: dict[int, Any]):
        self.name = name
        self.path = path
        self.trt = trt
        self.description = description
        self._engines = engines
        self._lock = threading.Lock()

    def engine(self, device_id: int) -> Any:
        """The engine deserialized on ``device_id`` (the calling thread has that device current)."""
        with self._lock:
            found = self._engines.get(device_id)
            if found is None:
                found = self._engines[device_id] = engines.deserialize(self.trt, self.path, device_id, self.name)
            return found

    def create_instance(self, context: InstanceContext) -> TrtInstance:
        if context.kind != "GPU":
            raise NaiadError(
                f"model '{self.name}': instance group '{context.group}' is KIND_{context.kind}, but TensorRT plans"
                " run only on GPU instances; set kind: KIND_GPU (or leave kind out)",
                ErrorCode.INVALID_ARG,
            )
        what = f"model '{self.name}' instance '{context.name}'"
        cuda = Cuda(context.device_id, what)
        profiles = instance_profiles(self.name, context.profiles, len(self.description.profiles))
        instance = TrtInstance(
            context.config,
            self.description,
            self.engine(context.device_id),
            cuda,
            profiles,
            graph_specs(context.config),
            context.name,
        )
        _log.info(
            "model '%s': instance '%s' on GPU %d with optimization profile(s) %s",
            self.name,
            context.name,
            context.device_id,
            profiles,
        )
        return instance

    def finalize(self) -> None:
        with self._lock:
            self._engines.clear()


def load_model(context: ModelLoadContext) -> TrtModel:
    """Check the host, deserialize the plan, complete the config when asked and check it against the engine."""
    config = context.config
    path = plan_path(context)
    model_file = str(path.relative_to(context.model_dir))
    require_gpu(context.model_name, model_file)
    trt = import_tensorrt(f"model '{context.model_name}' ({model_file})")
    device_id = _first_gpu(config)
    Cuda(device_id, f"model '{context.model_name}'")
    engine = engines.deserialize(trt, path, device_id, context.model_name)
    description = engines.describe(trt, engine)
    if context.auto_complete:
        complete_config(config, description)
    check_config(config, description, model_file)
    graph_specs(config)  # refuse bad graph specs at load, not per instance
    return TrtModel(context.model_name, path, trt, description, {device_id: engine})


def _first_gpu(config: ModelConfig) -> int:
    for group in config.instance_group:
        if group.gpus:
            return int(group.gpus[0])
    return 0
