"""One instance: its own compiled model and infer request, run by :class:`TensorInstance`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import Arrays, ErrorCode, InstanceContext, NaiadError, TensorInstance
from naiad_openvino.devices import choose_device, supported_properties
from naiad_openvino.model import OpenVinoModel
from naiad_openvino.reader import ov_message

logger = logging.getLogger("naiad.openvino")


class OpenVinoInstance(TensorInstance):
    """Compiles the prepared model for the instance's device and runs one batch at a time."""

    def __init__(self, model: OpenVinoModel, context: InstanceContext) -> None:
        super().__init__(context.config)
        self.prepared = model.prepared
        self.device = choose_device(
            model.core, context.kind, context.device_id, model.options.target_device, context.model_name, context.name
        )
        self.batch_padding = model.options.batch_padding
        properties = supported_properties(model.core, self.device, model.options.compile_properties, context.model_name)
        try:
            self.compiled: Any = model.core.compile_model(self.prepared.model, self.device, properties)
            self.request: Any = self.compiled.create_infer_request()
        except Exception as error:
            raise NaiadError(
                f"model '{context.model_name}', instance '{context.name}': OpenVINO cannot compile '{model.path}' "
                f"for device {self.device}: {ov_message(error)}",
                ErrorCode.INVALID_ARG,
            ) from None
        logger.info(
            "model '%s' instance '%s' compiled for OpenVINO device %s", context.model_name, context.name, self.device
        )

    def run(self, inputs: Arrays) -> Mapping[str, npt.NDArray[Any]]:
        prepared = self.prepared
        feed: dict[int, npt.NDArray[Any]] = {}
        for name, array in inputs.items():
            feed[prepared.input_ports[name]] = array
        rows = next(iter(inputs.values())).shape[0] if self.batching and inputs else 0
        if prepared.static_batch is not None and rows != prepared.static_batch:
            feed = self._pad(feed, rows, prepared.static_batch)
        try:
            results = self.request.infer(feed)
        except Exception as error:
            raise NaiadError(f"model '{self.model_name}': OpenVINO inference failed: {ov_message(error)}") from None
        outputs: dict[str, npt.NDArray[Any]] = {}
        for name, index in prepared.output_ports.items():
            array = results[index]
            if prepared.static_batch is not None:
                array = array[:rows]
            outputs[name] = array
        return outputs

    def _pad(self, feed: dict[int, npt.NDArray[Any]], rows: int, batch: int) -> dict[int, npt.NDArray[Any]]:
        """Zero-pad a smaller batch up to the model's static batch size (ENABLE_BATCH_PADDING)."""
        if rows > batch or not self.batch_padding:
            raise NaiadError(
                f"expected requests with batch size '{batch}', got '{rows}'... this error can be avoided by setting "
                "'ENABLE_BATCH_PADDING' parameter in model configuration to 'YES' at a performance cost."
            )
        return {
            index: np.concatenate([array, np.zeros((batch - rows, *array.shape[1:]), dtype=array.dtype)])
            for index, array in feed.items()
        }

    def finalize(self) -> None:
        self.request = None
        self.compiled = None
