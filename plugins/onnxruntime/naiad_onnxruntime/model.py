"""Loading one ONNX model version and creating the sessions of its instances.

At load, one CPU session (the *probe*) reads the model's inputs and outputs; they complete the
config when auto-complete is on and are checked against it in any case. Once the config is final
(:meth:`OnnxModel.configured`) the probe is kept for the first instance that runs on the plain CPU
execution provider, so a CPU-only model is read from disk once per instance, not once more; it is
dropped when no instance will. Every instance gets its own ``InferenceSession`` unless
``share_session_between_instances`` is set, in which case the instances of one instance group
(on one device) share one.
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
    ModelInstanceGroup,
    ModelLoadContext,
    NaiadError,
)
from naiad_onnxruntime import providers
from naiad_onnxruntime.autocomplete import complete_config
from naiad_onnxruntime.checks import check_config
from naiad_onnxruntime.errors import ort_error
from naiad_onnxruntime.instance import OnnxInstance
from naiad_onnxruntime.options import BackendSettings, SessionSettings, ensure_global_thread_pool
from naiad_onnxruntime.tensors import ModelIO, read_io

DEFAULT_MODEL_FILENAME = "model.onnx"

_log = logging.getLogger("naiad.onnxruntime")
# ONNX Runtime's OpenVINO EP is not safe to initialise from several threads at once (Triton locks too).
_openvino_lock = threading.Lock()
# Instance kinds whose execution providers are the CPU accelerators, then CPU (GPU ones add CUDA first).
_PLAIN_CPU_KINDS = (ModelInstanceGroup.KIND_CPU, ModelInstanceGroup.KIND_MODEL)


def model_path(context: ModelLoadContext) -> Path:
    """``<version>/<default_model_filename>``; a folder there means ``<folder>/model.onnx`` (external data)."""
    path = context.version_dir / (context.config.default_model_filename or DEFAULT_MODEL_FILENAME)
    if path.is_dir():
        path = path / DEFAULT_MODEL_FILENAME
    if not path.is_file():
        raise NaiadError(
            f"unable to find '{path}' for model '{context.model_name}': put the ONNX model there (a file, or a"
            f" folder holding {DEFAULT_MODEL_FILENAME} and its external data), or name it with"
            " default_model_filename in config.pbtxt",
            ErrorCode.UNAVAILABLE,
        )
    return path


class OnnxModel(BackendModel):
    """A loaded model version: its file, settings, I/O and the sessions not yet handed to instances."""

    def __init__(
        self, config: ModelConfig, path: Path, settings: SessionSettings, io: ModelIO, probe: Any | None
    ) -> None:
        self.name = config.name
        self.path = path
        self.settings = settings
        self.io = io
        self._probe = probe
        self._shared: dict[tuple[str, int], Any] = {}  # (instance group, device id) -> session
        self._lock = threading.RLock()  # guards the probe and the shared sessions

    def configured(self, config: ModelConfig) -> None:
        """Drop the probe when no instance of the final config runs on the plain CPU execution provider."""
        if not _runs_plain_cpu(config):
            with self._lock:
                self._probe = None

    def create_instance(self, context: InstanceContext) -> OnnxInstance:
        import onnxruntime as ort

        plan = providers.plan(context.config, context.kind, context.device_id, self.settings.cuda_parameters)
        providers.check_available(plan, ort.get_available_providers(), self.name, context.name)
        if self.settings.share_session:
            key = (context.group, context.device_id)
            with self._lock:
                session = self._shared.get(key)
                if session is None:
                    session = self._shared[key] = self._session(ort, plan, context.name)
                else:
                    _log.info(
                        "model '%s': instance '%s' shares the session of group '%s'",
                        self.name,
                        context.name,
                        context.group,
                    )
        else:
            session = self._session(ort, plan, context.name)
        return OnnxInstance(context.config, self.io, session, self.settings.run_options(ort))

    def _session(self, ort: Any, plan: list[providers.Provider], instance: str) -> Any:
        if [p.name for p in plan] == [providers.CPU]:
            with self._lock:
                probe, self._probe = self._probe, None
            if probe is not None:
                _log.info(
                    "model '%s': instance '%s' runs the session the load opened, on CPUExecutionProvider",
                    self.name,
                    instance,
                )
                return probe
        session = open_session(ort, self.path, self.settings, plan)
        providers.check_enabled(plan, session.get_providers(), self.name, instance)
        _log.info(
            "model '%s': session for instance '%s' on %s", self.name, instance, ", ".join(session.get_providers())
        )
        return session

    def finalize(self) -> None:
        with self._lock:
            self._probe = None
            self._shared.clear()


def open_session(ort: Any, path: Path, settings: SessionSettings, plan: list[providers.Provider]) -> Any:
    """An ``InferenceSession`` for ``path`` on the planned providers; ORT failures in Triton's words."""
    options = settings.session_options(ort)
    names = [provider.name for provider in plan]
    provider_options = [dict(provider.options) for provider in plan]
    try:
        if providers.OPENVINO in names:
            with _openvino_lock:
                return ort.InferenceSession(
                    str(path), sess_options=options, providers=names, provider_options=provider_options
                )
        return ort.InferenceSession(str(path), sess_options=options, providers=names, provider_options=provider_options)
    except Exception as error:
        raise ort_error(error) from error


def load_model(context: ModelLoadContext) -> OnnxModel:
    """Open the model, complete the config when asked, check it against the model, keep what instances need."""
    import onnxruntime as ort

    config = context.config
    path = model_path(context)
    backend = BackendSettings.from_backend_config(context.backend_config)
    settings = SessionSettings.from_config(config, global_thread_pool=ensure_global_thread_pool(ort, backend))
    probe = open_session(ort, path, settings, [providers.Provider(providers.CPU)])
    io = read_io(probe)
    if context.auto_complete:
        complete_config(config, io, context.default_max_batch_size)
    check_config(config, io, str(path.relative_to(context.model_dir)))
    return OnnxModel(config, path, settings, io, probe)


def _runs_plain_cpu(config: ModelConfig) -> bool:
    """Whether an instance of the final ``config`` runs on CPUExecutionProvider alone (see :func:`providers.plan`)."""
    if config.optimization.execution_accelerators.cpu_execution_accelerator:
        return False
    return any(group.kind in _PLAIN_CPU_KINDS and group.count > 0 for group in config.instance_group)
