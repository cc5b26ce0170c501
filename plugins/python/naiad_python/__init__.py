"""naiad's ``python`` backend: runs Triton python-backend models (``model.py``) unchanged.

The hook implementations below are all naiad sees of this package; the work happens in
submodules imported on first use:

* :mod:`naiad_python.backend_model` checks the model file and runs ``auto_complete_config``
  (:mod:`naiad_python.autocomplete`);
* :mod:`naiad_python.instance` imports a private copy of ``model.py`` per instance
  (:mod:`naiad_python.loader`), calls ``initialize`` and enforces the ``execute`` contract;
* :mod:`naiad_python.pbutils` implements the ``triton_python_backend_utils`` module models
  import.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from naiad.backend import BackendInfo, ModelFormat, hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = version("naiad-python")  # the installed metadata: the VERSION file

__all__ = [
    "__version__",
    "naiad_backend_from_directory",
    "naiad_backend_info",
    "naiad_create_instance",
    "naiad_load_model",
]


@hookimpl
def naiad_backend_info() -> BackendInfo:
    """Models are found by their ``model.py``; there is no platform."""
    return BackendInfo("python", (ModelFormat("model.py"),))


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Check ``<version>/model.py`` and, when auto-complete is on, let the model complete its config."""
    from naiad_python.backend_model import load_model

    return load_model(context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Import a private copy of the model file and initialize a ``TritonPythonModel``: in a worker process
    when the config says ``INSTANCE_ISOLATION: "process"``, else in the server process."""
    from naiad_python.backend_model import PythonModel, isolation_of

    if not isinstance(model, PythonModel):
        return None
    if isolation_of(context) == "process":
        from naiad_python.isolation.instance import IsolatedInstance

        return IsolatedInstance(model, context)
    from naiad_python.instance import PythonModelInstance

    return PythonModelInstance(model, context)


@hookimpl
def naiad_backend_from_directory(name: str, directory: Path) -> object | None:
    """Serve Triton's python-based backend ``name`` from ``directory/model.py``, if it holds one."""
    from naiad_python.based_backend import backend_in

    return backend_in(name, directory)
