"""The loaded model: an OpenVINO core, the model read from disk, and the parsed parameters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from naiad.backend import BackendModel, ModelConfig, ModelInstanceGroup, ModelLoadContext, invalid_arg
from naiad_openvino.autocomplete import auto_complete
from naiad_openvino.parameters import OpenVinoOptions, parse_parameters
from naiad_openvino.prepare import PreparedModel, prepare
from naiad_openvino.reader import add_extension, read_model


class OpenVinoModel(BackendModel):
    """One model version; instances compile :meth:`prepared` for their device."""

    def __init__(self, name: str, path: Path, core: Any, ov_model: Any, options: OpenVinoOptions) -> None:
        self.name = name
        self.path = path
        self.core = core
        self.ov_model = ov_model
        self.options = options
        self._prepared: PreparedModel | None = None
        self._lock = threading.Lock()

    def prepared(self, config: ModelConfig) -> PreparedModel:
        """The model checked against the final ``config`` and reshaped for it (done once)."""
        with self._lock:
            if self._prepared is None:
                self._prepared = prepare(self.ov_model, config, self.options, str(self.path))
            return self._prepared

    def finalize(self) -> None:
        self._prepared = None
        self.ov_model = None
        self.core = None


def load_model(context: ModelLoadContext) -> OpenVinoModel:
    """Read the model file, load CPU_EXTENSION_PATH and auto-complete the config."""
    import openvino as ov

    config = context.config
    options = parse_parameters(config)
    if not config.instance_group:
        # Triton's openvino backend prefers KIND_CPU for models without instance groups, so
        # KIND_AUTO never resolves to an (NVIDIA) GPU that OpenVINO cannot use.
        config.instance_group.add(name=config.name, kind=ModelInstanceGroup.KIND_CPU)
    core = ov.Core()
    if options.cpu_extension_path:
        add_extension(core, config.name, options.cpu_extension_path)
    path = context.model_file
    ov_model = read_model(core, config.name, path)
    if context.auto_complete:
        default_batch = _default_max_batch_size(context)
        auto_complete(config, ov_model, default_batch, str(path))
    return OpenVinoModel(config.name, path, core, ov_model, options)


def _default_max_batch_size(context: ModelLoadContext) -> int:
    value = context.backend_config.get("default-max-batch-size", "4")
    try:
        return int(value)
    except ValueError:
        raise invalid_arg(
            f"model '{context.model_name}': --backend-config=openvino,default-max-batch-size={value} is not an integer"
        ) from None
