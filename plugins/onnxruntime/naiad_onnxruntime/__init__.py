"""naiad's ``onnxruntime`` backend: serves ONNX models with ONNX Runtime, as Triton's onnxruntime backend does.

The hook implementations below are all naiad sees of this package; ONNX Runtime is imported only
when a model needs it:

* :func:`naiad_backend_info` tells naiad the backend's model file and platform;
* :mod:`naiad_onnxruntime.model` opens the model, completes the config from the graph
  (:mod:`~naiad_onnxruntime.autocomplete`), checks it (:mod:`~naiad_onnxruntime.checks`) and
  creates one session per instance on the execution providers :mod:`~naiad_onnxruntime.providers`
  picks, with the session settings of :mod:`~naiad_onnxruntime.options`;
* :mod:`naiad_onnxruntime.instance` runs a session for a batch of requests.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from naiad.backend import BackendInfo, ModelFormat, hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = version("naiad-onnxruntime")  # the installed metadata: the VERSION file

__all__ = ["__version__", "naiad_backend_info", "naiad_create_instance", "naiad_load_model"]


@hookimpl
def naiad_backend_info() -> BackendInfo:
    """``model.onnx`` for platform ``onnxruntime_onnx`` (others refused), two instances per KIND_CPU group."""
    return BackendInfo(
        "onnxruntime",
        (ModelFormat("model.onnx", ("onnxruntime_onnx",)),),
        checks_platform=True,
        default_cpu_instance_count=2,
    )


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Open ``<version>/model.onnx``, complete the config from it when asked, and check the config against it."""
    from naiad_onnxruntime.model import load_model

    return load_model(context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Create the instance's ONNX Runtime session on the execution providers its kind and config ask for."""
    from naiad_onnxruntime.model import OnnxModel

    if not isinstance(model, OnnxModel):
        return None
    return model.create_instance(context)
