"""One model instance: an ONNX Runtime session behind naiad's :class:`TensorInstance`.

``TensorInstance`` merges a batch of requests along the batch dimension and splits the outputs
back; :meth:`OnnxInstance.run` only adapts arrays to what the session takes and returns:

* inputs arrive in their config ``reshape``, and outputs leave in theirs: the core maps both
  from and to the ``dims`` clients see, as Triton does;
* scalar model inputs get their ``[1]``-shaped data as a scalar; scalar model outputs come back
  with the config's dims;
* BYTES inputs (numpy ``bytes`` objects) are decoded to ``str``: ONNX Runtime's Python API only
  takes UTF-8 strings. String outputs come back as ``str`` and are encoded by ``TensorInstance``;
* on a session with the CUDA execution provider, inputs already on a GPU (from CUDA shared memory)
  are bound where they are with an IOBinding, without a host round trip.

Sequence control and implicit-state inputs arrive as ordinary request inputs; state outputs are
computed with the config's outputs, for the sequence batcher to capture.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import Arrays, DataType, ModelConfig, TensorInstance, invalid_arg
from naiad_onnxruntime.errors import ort_error
from naiad_onnxruntime.tensors import ModelIO

_STRING = DataType.Value("TYPE_STRING")


class OnnxInstance(TensorInstance):
    """Runs one ``onnxruntime.InferenceSession`` (its own, or its group's when shared)."""

    def __init__(self, config: ModelConfig, io: ModelIO, session: Any, run_options: Any) -> None:
        super().__init__(config)
        self.session: Any = session
        self.run_options = run_options
        # Config outputs plus implicit-state outputs, which naiad's sequence batcher requests.
        self.output_names = [output.name for output in config.output]
        for state in config.sequence_batching.state:
            if state.output_name not in self.output_names:
                self.output_names.append(state.output_name)
        self.string_inputs = {i.name for i in config.input if i.data_type == _STRING}
        self.scalar_inputs = {info.name for info in (*io.inputs, *io.initializers) if not info.dims}
        self.scalar_outputs = {
            o.name: list(o.dims) for o in config.output if (info := io.output(o.name)) and not info.dims
        }
        self.device_inputs = "CUDAExecutionProvider" in session.get_providers()

    def run(self, inputs: Arrays) -> Mapping[str, npt.NDArray[Any]]:
        feed: dict[str, npt.NDArray[Any]] = {}
        for name, array in inputs.items():
            if name in self.scalar_inputs:
                array = array.reshape(())
            if name in self.string_inputs:
                array = self._strings(name, array)
            feed[name] = array
        try:
            if all(isinstance(array, np.ndarray) for array in feed.values()):
                results = self.session.run(self.output_names, feed, self.run_options)
            else:
                results = self._run_bound(feed)
        except Exception as error:
            raise ort_error(error) from error
        outputs: dict[str, npt.NDArray[Any]] = {}
        for name, value in zip(self.output_names, results, strict=True):
            array = np.asarray(value)
            if name in self.scalar_outputs:
                array = array.reshape(self.scalar_outputs[name])
            outputs[name] = array
        return outputs

    def _run_bound(self, feed: Mapping[str, Any]) -> list[npt.NDArray[Any]]:
        """Run with device inputs bound in place (torch or CuPy arrays) and host outputs."""
        binding = self.session.io_binding()
        for name, array in feed.items():
            if isinstance(array, np.ndarray):
                binding.bind_cpu_input(name, array)
                continue
            array = array.contiguous() if hasattr(array, "contiguous") else array
            interface = array.__cuda_array_interface__
            binding.bind_input(
                name,
                "cuda",
                _device_index(array),
                np.dtype(interface["typestr"]),
                list(interface["shape"]),
                interface["data"][0],
            )
        for name in self.output_names:
            binding.bind_output(name)
        self.session.run_with_iobinding(binding, self.run_options)
        results: list[npt.NDArray[Any]] = binding.copy_outputs_to_cpu()
        return results

    def _strings(self, name: str, array: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
        out = np.empty(array.shape, dtype=np.object_)
        try:
            for index, item in enumerate(array.flat):
                out.flat[index] = item.decode("utf-8") if isinstance(item, bytes) else str(item)
        except UnicodeDecodeError as error:
            raise invalid_arg(
                f"input '{name}' of model '{self.model_name}' holds an element that is not valid UTF-8 ({error});"
                " ONNX Runtime's string tensors take UTF-8 text only"
            ) from None
        return out

    def finalize(self) -> None:
        self.session = None


def _device_index(array: Any) -> int:
    """The CUDA device a torch tensor or CuPy array lives on."""
    device = array.device
    return int(device.index if hasattr(device, "index") else device.id)
