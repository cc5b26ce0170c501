"""naiad's ``openvino`` backend: serves OpenVINO IR and ONNX models with OpenVINO.

The two hook implementations below are all naiad sees of this package; OpenVINO is imported
only when a model loads:

* :mod:`naiad_openvino.model` reads the model file (:mod:`naiad_openvino.reader`), parses
  Triton's parameters (:mod:`naiad_openvino.parameters`) and auto-completes the config
  (:mod:`naiad_openvino.autocomplete`);
* :mod:`naiad_openvino.prepare` checks the final config against the model and reshapes it,
  once, when the first instance is created;
* :mod:`naiad_openvino.instance` compiles the model per instance for the device
  :mod:`naiad_openvino.devices` picks, and runs batches through one infer request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from naiad.backend import hookimpl

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext

__version__ = "0.1.0"

__all__ = ["__version__", "naiad_create_instance", "naiad_load_model"]


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    """Read ``model.xml`` (+ ``model.bin``), ``model.onnx`` or ``default_model_filename`` with OpenVINO."""
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
