"""One model instance: TensorRT execution contexts on one GPU, one per optimization profile.

Each instance owns a CUDA stream (and, with ``output_copy_stream``, a second one for copying the
outputs back) and one ``IExecutionContext`` per profile, with device buffers sized for the
profile's largest shapes. A batch runs on the context whose profile fits its shapes
(:func:`~naiad_tensorrt.profiles.choose_profile`): inputs are bound by name with
``set_input_shape`` / ``set_tensor_address``, then ``execute_async_v3`` runs it, or the CUDA graph
captured for exactly these shapes is launched. Inputs already on this GPU (CUDA shared memory) are
bound where they are; host inputs are copied into the context's buffers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import Arrays, ModelConfig, NaiadError, TensorInstance, datatypes, invalid_arg
from naiad_tensorrt.cuda import Cuda
from naiad_tensorrt.description import EngineDescription, shape_text
from naiad_tensorrt.graphs import GraphSpec, capture_shapes
from naiad_tensorrt.profiles import choose_profile

_log = logging.getLogger("naiad.tensorrt")

Shapes = dict[str, tuple[int, ...]]


def graph_key(shapes: Mapping[str, Sequence[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple(sorted((name, tuple(shape)) for name, shape in shapes.items()))


@dataclass
class _Context:
    """An execution context for one profile, its device buffers and the graphs captured on it."""

    profile: int
    context: Any
    buffers: dict[str, int] = field(default_factory=dict)
    graphs: dict[tuple[tuple[str, tuple[int, ...]], ...], Any] = field(default_factory=dict)


class TrtInstance(TensorInstance):
    """Runs a TensorRT engine on one GPU with its own stream(s) and contexts."""

    device_inputs = True

    def __init__(
        self,
        config: ModelConfig,
        description: EngineDescription,
        engine: Any,
        cuda: Cuda,
        profiles: Sequence[int],
        graphs: Sequence[GraphSpec],
        name: str,
    ) -> None:
        super().__init__(config)
        self.name = name
        self.description = description
        self.engine = engine
        self.cuda = cuda
        self.input_names = [t.name for t in description.inputs]
        self.output_names = [t.name for t in description.outputs]
        self.dtypes = {t.name: datatypes.BY_CONFIG[t.config_type].numpy for t in description.tensors}
        self.stream = cuda.stream()
        self.copy_stream = cuda.stream() if config.optimization.cuda.output_copy_stream else None
        self.computed = cuda.event() if self.copy_stream is not None else None
        self.contexts: dict[int, _Context] = {}
        for profile in profiles:
            self.contexts[profile] = self._context(profile)
        for context in self.contexts.values():
            for spec in graphs:
                self._capture(context, spec)

    def _context(self, profile: int) -> _Context:
        context = _Context(profile, self.engine.create_execution_context())
        if context.context is None:
            raise NaiadError(f"model '{self.model_name}' instance '{self.name}': TensorRT could not create a context")
        if profile != 0:
            context.context.set_optimization_profile_async(profile, int(self.stream))
            self.cuda.synchronize(self.stream)
        for name in self.input_names:
            shape = self.description.profile_shape(profile, name).max
            context.context.set_input_shape(name, shape)
            context.buffers[name] = self.cuda.malloc(self._bytes(name, shape))
        for name in self.output_names:
            shape = tuple(context.context.get_tensor_shape(name))
            if any(dim < 0 for dim in shape):
                raise NaiadError(
                    f"model '{self.model_name}': output '{name}' has a data-dependent shape {shape_text(shape)},"
                    " which naiad's tensorrt backend does not serve"
                )
            context.buffers[name] = self.cuda.malloc(self._bytes(name, shape))
        return context

    def _capture(self, context: _Context, spec: GraphSpec) -> None:
        shapes = capture_shapes(spec, self.description, context.profile, self.batching, self.input_names)
        if shapes is None:
            _log.info(
                "model '%s' instance '%s': no CUDA graph for batch size %d on profile %d (outside the profile)",
                self.model_name,
                self.name,
                spec.batch_size,
                context.profile,
            )
            return
        try:
            self._bind(context, shapes, {})
            self._enqueue(context)  # TensorRT sets itself up on the first run, which must not be captured
            self.cuda.synchronize(self.stream)
            self.cuda.begin_capture(self.stream)
            try:
                self._enqueue(context)
            finally:
                graph = self.cuda.end_capture(self.stream)
        except NaiadError as error:
            _log.warning(
                "model '%s' instance '%s': CUDA graph for %s not captured (%s); such batches run without a graph",
                self.model_name,
                self.name,
                shapes,
                error.message,
            )
            return
        context.graphs[graph_key(shapes)] = graph
        _log.info(
            "model '%s' instance '%s': captured CUDA graph for %s on profile %d",
            self.model_name,
            self.name,
            ", ".join(f"{name} {shape_text(shape)}" for name, shape in shapes.items()),
            context.profile,
        )

    def run(self, inputs: Arrays) -> Mapping[str, npt.NDArray[Any]]:
        missing = [name for name in self.input_names if name not in inputs]
        if missing:
            raise invalid_arg(f"model '{self.model_name}': the engine needs input(s) {', '.join(missing)}, not sent")
        self.cuda.use_device()
        shapes = {name: tuple(inputs[name].shape) for name in self.input_names}
        profile = choose_profile(self.model_name, self.description, list(self.contexts), shapes)
        context = self.contexts[profile]
        graph = context.graphs.get(graph_key(shapes))
        in_place = self._bind(context, shapes, {} if graph is not None else self._device_inputs(inputs))
        for name in self.input_names:
            if name not in in_place:
                self._copy_in(context.buffers[name], inputs[name], name)
        if graph is not None:
            self.cuda.launch(graph, self.stream)
        else:
            self._enqueue(context)
        return self._outputs(context)

    def _device_inputs(self, inputs: Arrays) -> dict[str, int]:
        """Addresses of inputs that are contiguous device arrays on this instance's GPU."""
        found: dict[str, int] = {}
        for name in self.input_names:
            interface = getattr(inputs[name], "__cuda_array_interface__", None)
            if interface and interface.get("strides") is None and _device_of(inputs[name]) == self.cuda.device_id:
                found[name] = int(interface["data"][0])
        return found

    def _bind(self, context: _Context, shapes: Shapes, device_inputs: Mapping[str, int]) -> set[str]:
        """Set input shapes and every tensor's address; returns the inputs bound in place on the device.

        TensorRT refuses addresses it cannot use (misaligned ones); those inputs use the context's buffer.
        """
        trt_context = context.context
        in_place: set[str] = set()
        for name, shape in shapes.items():
            if not trt_context.set_input_shape(name, shape):
                raise invalid_arg(
                    f"model '{self.model_name}': TensorRT refused shape {shape_text(shape)} for input '{name}'"
                    f" on profile {context.profile}"
                )
            if name in device_inputs and trt_context.set_tensor_address(name, device_inputs[name]):
                in_place.add(name)
            else:
                trt_context.set_tensor_address(name, context.buffers[name])
        for name in self.output_names:
            trt_context.set_tensor_address(name, context.buffers[name])
        return in_place

    def _enqueue(self, context: _Context) -> None:
        if not context.context.execute_async_v3(int(self.stream)):
            raise NaiadError(
                f"model '{self.model_name}' instance '{self.name}': TensorRT execute_async_v3 failed on profile"
                f" {context.profile}; TensorRT's error is in the server log above"
            )

    def _copy_in(self, buffer: int, array: Any, name: str) -> None:
        if hasattr(array, "__cuda_array_interface__"):
            host = np.ascontiguousarray(array.cpu().numpy() if hasattr(array, "cpu") else array.get())
        else:
            host = np.ascontiguousarray(array, dtype=self.dtypes[name])
        # From pageable host memory the copy has read the array when the call returns, so it may be freed.
        self.cuda.copy_async(buffer, host.ctypes.data, host.nbytes, self.stream)

    def _outputs(self, context: _Context) -> dict[str, npt.NDArray[Any]]:
        stream = self.stream
        if self.copy_stream is not None and self.computed is not None:
            self.cuda.record(self.computed, self.stream)
            self.cuda.wait(self.copy_stream, self.computed)
            stream = self.copy_stream
        outputs: dict[str, npt.NDArray[Any]] = {}
        for name in self.output_names:
            shape = tuple(context.context.get_tensor_shape(name))
            array = np.empty(shape, dtype=self.dtypes[name])
            self.cuda.copy_async(array.ctypes.data, context.buffers[name], array.nbytes, stream)
            outputs[name] = array
        self.cuda.synchronize(stream)
        return outputs

    def _bytes(self, name: str, shape: Sequence[int]) -> int:
        return math.prod(shape) * int(self.dtypes[name].itemsize)

    def finalize(self) -> None:
        self.cuda.use_device()
        self.cuda.synchronize(self.stream)
        for context in self.contexts.values():
            for graph in context.graphs.values():
                self.cuda.destroy_graph(graph)
            for pointer in context.buffers.values():
                self.cuda.free(pointer)
            context.context = None
        self.contexts.clear()
        if self.computed is not None:
            self.cuda.destroy_event(self.computed)
        for stream in (self.stream, self.copy_stream):
            if stream is not None:
                self.cuda.destroy_stream(stream)


def _device_of(array: Any) -> int:
    """The CUDA device a torch tensor or CuPy array lives on."""
    device = array.device
    return int(device.index if hasattr(device, "index") else device.id)
