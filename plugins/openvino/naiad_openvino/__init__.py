"""naiad's ``openvino`` backend: serves OpenVINO IR and ONNX models with OpenVINO.

The hook implementations below are all naiad sees of this package; OpenVINO is imported
only when a model loads:

* :func:`naiad_backend_info` declares ``model.xml`` as the model file and KIND_CPU as the kind
  of the instance group naiad adds to a config without one (Triton's openvino backend);
* :mod:`naiad_openvino.model` reads the model file (:mod:`naiad_openvino.reader`), parses
  Triton's parameters (:mod:`naiad_openvino.parameters`) and auto-completes the config
  (:mod:`naiad_openvino.autocomplete`);
* :mod:`naiad_openvino.prepare` checks the final config against the model and reshapes it,
  once, in ``OpenVinoModel.configured`` (before any instance is created);
* :mod:`naiad_openvino.instance` compiles the model per instance for the device
  :mod:`naiad_openvino.devices` picks, and runs batches through one infer request.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from naiad.backend import BackendInfo, ModelFormat, hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = version("naiad-openvino")  # the installed metadata: the VERSION file

__all__ = ["__version__", "naiad_backend_info", "naiad_create_instance", "naiad_load_model"]


@hookimpl
def naiad_backend_info() -> BackendInfo:
    """``model.xml`` identifies the model; a config without instance groups gets a KIND_CPU one.

    KIND_CPU because OpenVINO's GPU plugin drives Intel GPUs: KIND_AUTO would pick KIND_GPU on a
    host with NVIDIA GPUs, which OpenVINO cannot use.
    """
    return BackendInfo("openvino", (ModelFormat("model.xml"),), default_instance_kind="CPU")


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Read ``model.xml`` (+ ``model.bin``), ``model.onnx`` or ``default_model_filename`` with OpenVINO."""
    from naiad_openvino.telemetry import keep_telemetry_off

    keep_telemetry_off()  # before the first ``import openvino``
    from naiad_openvino.model import load_model

    return load_model(context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Compile the model for the instance's device and create its infer request."""
    from naiad_openvino.instance import OpenVinoInstance
    from naiad_openvino.model import OpenVinoModel

    if not isinstance(model, OpenVinoModel):
        return None
    return OpenVinoInstance(model, context)
