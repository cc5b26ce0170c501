"""naiad's ``pytorch`` backend: serves TorchScript models (``model.pt``) like Triton's PyTorch backend.

The hook implementations below are all naiad sees of this package; torch is imported by the
submodules on first use, never by this module:

* :func:`naiad_backend_info` declares the model files and platforms (Triton's ``pytorch`` entry);
* :mod:`naiad_pytorch.backend_model` checks the file and parameters (:mod:`~naiad_pytorch.parameters`,
  :mod:`~naiad_pytorch.settings`) and auto-completes the config (:mod:`~naiad_pytorch.autocomplete`);
* :mod:`naiad_pytorch.instance` loads a module per instance (:mod:`~naiad_pytorch.torchscript`),
  binds config tensors to ``forward`` (:mod:`~naiad_pytorch.binding`) and runs it
  (:mod:`~naiad_pytorch.execution`, :mod:`~naiad_pytorch.convert`);
* :mod:`naiad_pytorch.python_runtime` serves models whose config says ``runtime: "model.py"``
  (Triton's PyTorch python runtime: an ``nn.Module`` from ``model.py`` under ``torch.compile``).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from naiad.backend import BackendInfo, ModelFormat, OnDisk, hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = version("naiad-pytorch")  # the installed metadata: the VERSION file

__all__ = ["__version__", "naiad_backend_info", "naiad_create_instance", "naiad_load_model"]


@hookimpl
def naiad_backend_info() -> BackendInfo:
    """``model.pt`` (a file; ``pytorch_libtorch``/``libtorch``) and ``model.pt2`` (``torch_aoti``, refused at load)."""
    return BackendInfo(
        "pytorch",
        (
            ModelFormat("model.pt", ("pytorch_libtorch", "libtorch"), OnDisk.FILE),
            ModelFormat("model.pt2", ("torch_aoti",)),
        ),
        checks_platform=True,
    )


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Check ``<version>/model.pt`` and the parameters; complete the config when auto-complete is on.
    A config with ``runtime: "model.py"`` is served by the python runtime instead."""
    if context.config.runtime == "model.py":
        from naiad_pytorch import python_runtime

        return python_runtime.load_model(context)
    from naiad_pytorch.backend_model import load_model

    return load_model(context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Load the instance's own TorchScript module on its device (KIND_CPU, KIND_GPU or KIND_MODEL)."""
    from naiad_pytorch.backend_model import PytorchModel
    from naiad_pytorch.instance import PytorchInstance

    if isinstance(model, PytorchModel):
        return PytorchInstance(model, context)
    from naiad_pytorch.python_runtime import PythonRuntimeInstance, PythonRuntimeModel

    if isinstance(model, PythonRuntimeModel):
        return PythonRuntimeInstance(model, context)
    return None
