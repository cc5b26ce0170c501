"""Loading one version of a TorchScript model: checks, parameters and auto-complete before instances."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import torch

from naiad.backend import BackendModel, ErrorCode, ModelConfig, ModelLoadContext, NaiadError
from naiad_pytorch import autocomplete, settings, torchscript
from naiad_pytorch.binding import AddedTensors, Binding, bind
from naiad_pytorch.parameters import OBSOLETE, TorchParameters, parse_parameters, setting_lines
from naiad_pytorch.schema import ForwardSchema

_log = logging.getLogger("naiad.pytorch")


class PytorchModel(BackendModel):
    """A TorchScript model version; instances load their own module (or share one per device)."""

    def __init__(self, context: ModelLoadContext, model_file: Path, parameters: TorchParameters) -> None:
        self.name = context.model_name
        self.version = context.version
        self.model_file = model_file
        self.parameters = parameters
        self._lock = threading.Lock()
        self._bindings: dict[ForwardSchema, Binding] = {}
        self._shared: dict[str, torch.jit.ScriptModule] = {}  # ENABLE_WEIGHT_SHARING: device -> module

    def module_for(self, device: torch.device | None) -> torch.jit.ScriptModule:
        """A module on ``device``: a fresh ``torch.jit.load``, or the device's shared one."""
        if not self.parameters.weight_sharing:
            return self._load(device)
        key = str(device)
        with self._lock:
            module = self._shared.get(key)
            if module is None:
                module = self._shared[key] = self._load(device)
            else:
                _log.info("Reusing TorchScript model for instance '%s' (on %s)", self.name, key)
            return module

    def _load(self, device: torch.device | None) -> torch.jit.ScriptModule:
        return torchscript.load_module(
            self.name, self.model_file, device, inference_mode=self.parameters.inference_mode
        )

    def binding_for(self, schema: ForwardSchema, config: ModelConfig) -> Binding:
        """The config-to-``forward`` binding, checked once per distinct schema."""
        with self._lock:
            binding = self._bindings.get(schema)
            if binding is None:
                binding = self._bindings[schema] = bind(
                    self.name,
                    self.model_file,
                    schema,
                    config.input,
                    config.output,
                    batching=config.max_batch_size > 0,
                    added=AddedTensors.of(config),
                )
            return binding

    def finalize(self) -> None:
        with self._lock:
            self._shared.clear()
            self._bindings.clear()


def load_model(context: ModelLoadContext) -> PytorchModel:
    """Check the file and config, apply thread settings, auto-complete, and return the model."""
    config = context.config
    if config.platform == "torch_aoti":
        raise NaiadError(
            f"model '{context.model_name}': platform 'torch_aoti' (AOTInductor .pt2 packages) is not supported "
            'by naiad\'s pytorch backend; serve a TorchScript model.pt (platform: "pytorch_libtorch")',
            ErrorCode.UNSUPPORTED,
        )
    model_file = context.model_file  # default_model_filename, which naiad fills from naiad_backend_info
    if not model_file.is_file():
        raise NaiadError(
            f"unable to find '{model_file}' for model '{context.model_name}': put the TorchScript file there "
            "or set default_model_filename in config.pbtxt",
            ErrorCode.UNAVAILABLE,
        )
    parameters = parse_parameters(context.model_name, config.parameters)
    if config.parameters:
        for line in setting_lines(context.model_name, parameters, config.parameters.keys()):
            _log.info("%s", line)
    for key, reason in OBSOLETE.items():
        if key in config.parameters:
            _log.warning("model '%s': parameter %s is ignored: %s", context.model_name, key, reason)
    settings.configure_threads(context.model_name, parameters)
    model = PytorchModel(context, model_file, parameters)
    if context.auto_complete:
        completed = autocomplete.complete_config(context, model_file, parameters)
        if completed is not None:
            model.binding_for(completed, config)
    return model
