"""Triton's python-based backends: ``<backend directory>/<name>/model.py`` serves every model whose
config says ``backend: "<name>"``, run by the python backend in place of a model file of its own.

Each model's ``args["model_repository"]`` is still its own folder, where such a backend finds the
files it reads (vLLM's ``model.json``, for one); its config records ``runtime: "model.py"``, as
Triton's does.
"""

from __future__ import annotations

from pathlib import Path

from naiad.backend import BackendInfo, BackendModel, InstanceContext, ModelInstance, ModelLoadContext, hookimpl

RUNTIME = "model.py"
"""The file a python-based backend's folder holds, and the ``runtime`` Triton records for its models."""


class PythonBasedBackend:
    """The backend hooks for one python-based backend: the python backend's, with its ``model.py``."""

    def __init__(self, name: str, model_file: Path) -> None:
        self.name = name
        self.model_file = model_file

    @hookimpl
    def naiad_backend_info(self) -> BackendInfo:
        """No model file of its own identifies such a model: its config names the backend."""
        return BackendInfo(self.name, ())

    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        from naiad_python.backend_model import load_model

        context.config.runtime = RUNTIME
        return load_model(context, self.model_file)

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance | None:
        from naiad_python import naiad_create_instance

        return naiad_create_instance(model, context)


def backend_in(name: str, directory: Path) -> PythonBasedBackend | None:
    """The python-based backend ``directory`` holds (its ``model.py``), or None if it holds none."""
    model_file = directory / RUNTIME
    return PythonBasedBackend(name, model_file) if model_file.is_file() else None
