"""A ready-made instance for engines that map named arrays to named arrays.

Framework backends (ONNX Runtime, PyTorch, OpenVINO, tree models) only implement
:meth:`TensorInstance.run`: this class merges a batch of requests into one call along the
batch dimension, splits the outputs back per request, keeps only the requested outputs,
converts them to the config's datatypes, and answers every request.

Ragged inputs (``allow_ragged_batch``) reach :meth:`run` flat, every request's elements one after
the other, with the config's ``batch_input`` tensors next to them, and ``batch_output`` tensors go
back to each request in the shape of its source input, as Triton's backends do (:mod:`naiad.ragged`).

It reports when each engine call started and ended (:meth:`InferenceRequest.report_compute`), so the
statistics extension counts merging the inputs as compute input and splitting, converting and sending
the outputs as compute output (see :mod:`naiad.statistics`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes, ragged
from naiad.backend_model import ModelInstance
from naiad.errors import NaiadError
from naiad.inference import InferenceRequest, InferenceResponse, report_compute
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.tensor import MemoryKind, Tensor

Arrays = dict[str, npt.NDArray[Any]]


class TensorInstance(ModelInstance):
    """Subclass and implement :meth:`run`; ``execute`` does the batching bookkeeping.

    Set ``device_inputs`` when :meth:`run` also takes device arrays (torch or CuPy, e.g. inputs read
    from CUDA shared memory): an input on a GPU is then handed over as it is, without a host round trip,
    when the engine call serves one request; otherwise every input arrives as a host numpy array.
    """

    device_inputs = False

    def __init__(self, config: ModelConfig) -> None:
        self.model_name = config.name
        self.batching = config.max_batch_size > 0
        self.output_types = {output.name: datatypes.BY_NUMBER[output.data_type] for output in config.output}
        self._config = config
        self._ragged = frozenset(t.name for t in config.input if t.allow_ragged_batch) if self.batching else frozenset()
        dims = {output.name: ((-1,) if self.batching else ()) + tuple(output.dims) for output in config.output}
        self._scatter = {  # batch output -> (its shape with the batch dimension, its source input)
            target: (dims[target], batch_output.source_input[0])
            for batch_output in config.batch_output
            for target in batch_output.target_name
        }

    def run(self, inputs: Arrays) -> Mapping[str, npt.NDArray[Any]]:
        """Run the engine once on ``inputs`` (batch dimension first for batching models)."""
        raise NotImplementedError

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for group in self._groups(requests):
            self._execute_group(group)

    def _groups(self, requests: Sequence[InferenceRequest]) -> list[list[InferenceRequest]]:
        """Requests that can share one engine call: same input names and non-batch shapes."""
        if not self.batching:
            return [[request] for request in requests]
        groups: dict[tuple[Any, ...], list[InferenceRequest]] = {}
        for request in requests:
            key = ragged.shape_key(request, self._ragged, True)
            groups.setdefault(key, []).append(request)
        return list(groups.values())

    def _execute_group(self, group: list[InferenceRequest]) -> None:
        inputs = {}
        for name, tensor in group[0].inputs.items():
            if name in self._ragged:
                inputs[name] = ragged.flattened(group, name)
            elif len(group) == 1:
                inputs[name] = self._array(tensor)
            else:
                inputs[name] = np.concatenate([request.inputs[name].numpy() for request in group])
        if self._config.batch_input:
            inputs.update(ragged.batch_inputs(self._config, group))
        merged = time.monotonic_ns()
        try:
            outputs = self.run(inputs)
        except NaiadError as error:
            self._fail(group, error)
            return
        except Exception as error:
            self._fail(group, NaiadError(f"model '{self.model_name}' failed: {type(error).__name__}: {error}"))
            return
        report_compute(group, merged, time.monotonic_ns())
        scattered = {
            name: ragged.scattered(outputs[name], dims, [request.inputs[source].shape for request in group])
            for name, (dims, source) in self._scatter.items()
            if name in outputs
        }
        offset = 0
        for index, request in enumerate(group):
            rows = slice(offset, offset + request.batch_size) if self.batching else slice(None)
            offset += request.batch_size
            tensors = [
                self._tensor(name, scattered[name][index] if name in scattered else outputs[name][rows])
                for name in request.requested_outputs
                if name in outputs
            ]
            request.sender.send(InferenceResponse(outputs=tensors), final=True)

    def _array(self, tensor: Tensor) -> Any:
        if self.device_inputs and tensor.memory is MemoryKind.GPU:
            return tensor.data
        return tensor.numpy()

    def _tensor(self, name: str, array: npt.NDArray[Any]) -> Tensor:
        datatype = self.output_types.get(name)
        if datatype is None:
            return Tensor(name, datatypes.from_numpy(array.dtype).wire, array)
        if datatype.wire == "BYTES":
            return Tensor(name, "BYTES", datatypes.to_bytes_array(array))
        if datatype.wire != "BF16" and array.dtype != datatype.numpy:
            array = array.astype(datatype.numpy)
        return Tensor(name, datatype.wire, array)

    @staticmethod
    def _fail(group: list[InferenceRequest], error: NaiadError) -> None:
        for request in group:
            request.sender.send(InferenceResponse(error=error), final=True)
