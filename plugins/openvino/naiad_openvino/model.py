"""The loaded model: an OpenVINO core, the model read from disk, and the parsed parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from naiad.backend import BackendModel, ErrorCode, ModelConfig, ModelLoadContext, NaiadError
from naiad_openvino.autocomplete import auto_complete
from naiad_openvino.parameters import OpenVinoOptions, parse_parameters
from naiad_openvino.prepare import PreparedModel, prepare
from naiad_openvino.reader import add_extension, read_model


class OpenVinoModel(BackendModel):
    """One model version; :meth:`configured` prepares it and instances compile :attr:`prepared`."""

    def __init__(self, name: str, path: Path, core: Any, ov_model: Any, options: OpenVinoOptions) -> None:
        self.name = name
        self.path = path
        self.core = core
        self.ov_model = ov_model
        self.options = options
        self._prepared: PreparedModel | None = None

    def configured(self, config: ModelConfig) -> None:
        """Check the final ``config`` against the model and reshape the model for it."""
        self._prepared = prepare(self.ov_model, config, self.options, str(self.path))

    @property
    def prepared(self) -> PreparedModel:
        """The model as :meth:`configured` prepared it."""
        if self._prepared is None:
            raise NaiadError(f"model '{self.name}': instance created before the config was final", ErrorCode.INTERNAL)
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
    core = ov.Core()
    if options.cpu_extension_path:
        add_extension(core, config.name, _extension_library(context, options.cpu_extension_path))
    path = context.model_file
    ov_model = read_model(core, config.name, path)
    if context.auto_complete:
        auto_complete(config, ov_model, context.default_max_batch_size, str(path))
    return OpenVinoModel(config.name, path, core, ov_model, options)


def _extension_library(context: ModelLoadContext, library: str) -> str:
    """CPU_EXTENSION_PATH as given in the repository's config (Triton's examples use absolute paths);
    from a load request's config, only a library inside the model's folder: loading it runs its code."""
    if not context.config_from_request:
        return library
    return str(context.path(library, "parameter CPU_EXTENSION_PATH"))
