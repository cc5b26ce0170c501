"""naiad's ``tensorrt`` backend: serves TensorRT plans on NVIDIA GPUs, as Triton's tensorrt backend does.

The hook implementations below are all naiad sees of this package; TensorRT and cuda-python are
imported only when a model loads, and only on a machine with a CUDA device:

* :func:`naiad_backend_info` tells naiad the model file ``model.plan`` and platform ``tensorrt_plan``;
* :mod:`naiad_tensorrt.model` checks the host, deserializes the plan, completes the config from the
  engine (:mod:`~naiad_tensorrt.autocomplete`) and checks it (:mod:`~naiad_tensorrt.checks`);
* :mod:`naiad_tensorrt.instance` runs batches on per-profile execution contexts, with CUDA graphs.

``naiad-tensorrt build`` (:mod:`naiad_tensorrt.build`) turns an ONNX model into a plan.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from naiad.backend import BackendInfo, Capabilities, ModelFormat, OnDisk, hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = version("naiad-tensorrt")  # the installed metadata: the VERSION file

__all__ = ["__version__", "naiad_backend_info", "naiad_create_instance", "naiad_load_model"]


@hookimpl
def naiad_backend_info() -> BackendInfo:
    """``model.plan`` for platform ``tensorrt_plan`` (others refused); instance groups may name profiles."""
    return BackendInfo(
        "tensorrt",
        (ModelFormat("model.plan", ("tensorrt_plan",), OnDisk.FILE),),
        checks_platform=True,
        capabilities=Capabilities(optimization_profiles=True),
    )


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Load ``<version>/model.plan`` on a GPU; UNAVAILABLE with the reason on a machine without one."""
    from naiad_tensorrt.model import load_model

    return load_model(context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Create the instance's execution contexts and stream(s) on its GPU."""
    from naiad_tensorrt.model import TrtModel

    if not isinstance(model, TrtModel):
        return None
    return model.create_instance(context)
