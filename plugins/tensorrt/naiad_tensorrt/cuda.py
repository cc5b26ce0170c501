"""The CUDA runtime calls the backend makes, through cuda-python's ``cuda.bindings.runtime``.

Every call's status is checked; a failure raises :class:`NaiadError` naming the call and CUDA's
error, for the person reading the log.
"""

from __future__ import annotations

from typing import Any

from naiad.backend import NaiadError
from naiad_tensorrt.environment import import_cuda_runtime


class Cuda:
    """A thin, checked wrapper over the runtime API for one device."""

    def __init__(self, device_id: int, what: str) -> None:
        self.rt: Any = import_cuda_runtime(what)
        self.device_id = device_id
        self.use_device()

    def check(self, result: Any, call: str) -> Any:
        """The values after the status of a cuda-python call; NaiadError when the status is an error."""
        values = result if isinstance(result, tuple) else (result,)
        error, rest = values[0], values[1:]
        if error != self.rt.cudaError_t.cudaSuccess:
            name = getattr(error, "name", str(error))
            raise NaiadError(f"CUDA call {call} failed on GPU {self.device_id}: {name}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def use_device(self) -> None:
        """Make this device current on the calling thread (the runtime's current device is per thread)."""
        self.check(self.rt.cudaSetDevice(self.device_id), f"cudaSetDevice({self.device_id})")

    def malloc(self, byte_size: int) -> int:
        return int(self.check(self.rt.cudaMalloc(max(byte_size, 1)), f"cudaMalloc({byte_size})"))

    def free(self, pointer: int) -> None:
        self.check(self.rt.cudaFree(pointer), "cudaFree")

    def stream(self) -> Any:
        return self.check(self.rt.cudaStreamCreateWithFlags(self.rt.cudaStreamNonBlocking), "cudaStreamCreate")

    def destroy_stream(self, stream: Any) -> None:
        self.check(self.rt.cudaStreamDestroy(stream), "cudaStreamDestroy")

    def synchronize(self, stream: Any) -> None:
        self.check(self.rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def copy_async(self, destination: int, source: int, byte_size: int, stream: Any) -> None:
        """Copy between any two addresses (unified addressing tells host from device)."""
        if byte_size:
            kind = self.rt.cudaMemcpyKind.cudaMemcpyDefault
            self.check(self.rt.cudaMemcpyAsync(destination, source, byte_size, kind, stream), "cudaMemcpyAsync")

    def event(self) -> Any:
        return self.check(self.rt.cudaEventCreateWithFlags(self.rt.cudaEventDisableTiming), "cudaEventCreate")

    def destroy_event(self, event: Any) -> None:
        self.check(self.rt.cudaEventDestroy(event), "cudaEventDestroy")

    def record(self, event: Any, stream: Any) -> None:
        self.check(self.rt.cudaEventRecord(event, stream), "cudaEventRecord")

    def wait(self, stream: Any, event: Any) -> None:
        self.check(self.rt.cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent")

    def begin_capture(self, stream: Any) -> None:
        mode = self.rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
        self.check(self.rt.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")

    def end_capture(self, stream: Any) -> Any:
        """The captured graph, instantiated; the graph itself is destroyed."""
        graph = self.check(self.rt.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
        try:
            return self.check(self.rt.cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate")
        finally:
            self.check(self.rt.cudaGraphDestroy(graph), "cudaGraphDestroy")

    def launch(self, graph_exec: Any, stream: Any) -> None:
        self.check(self.rt.cudaGraphLaunch(graph_exec, stream), "cudaGraphLaunch")

    def destroy_graph(self, graph_exec: Any) -> None:
        self.check(self.rt.cudaGraphExecDestroy(graph_exec), "cudaGraphExecDestroy")
