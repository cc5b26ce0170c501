"""One model instance: its own TorchScript module on its device, run by :class:`TensorInstance`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy.typing as npt
import torch

from naiad.backend import ErrorCode, InstanceContext, NaiadError, TensorInstance
from naiad_pytorch import settings, torchscript
from naiad_pytorch.backend_model import PytorchModel
from naiad_pytorch.binding import AddedTensors
from naiad_pytorch.execution import Call


def device_for(context: InstanceContext) -> torch.device | None:
    """KIND_CPU -> cpu, KIND_GPU -> cuda:<device_id>, KIND_MODEL -> None (the file's own placement)."""
    if context.kind == "MODEL":
        return None
    if context.kind != "GPU":
        return torch.device("cpu")
    where = f"instance '{context.name}' of model '{context.model_name}' (KIND_GPU, device {context.device_id})"
    if not torch.cuda.is_available():
        raise NaiadError(
            f"{where}: torch {torch.__version__} sees no CUDA device (torch.version.cuda={torch.version.cuda}); "
            "install a CUDA build of torch or use KIND_CPU",
            ErrorCode.UNAVAILABLE,
        )
    if context.device_id >= torch.cuda.device_count():
        raise NaiadError(f"{where}: torch sees only {torch.cuda.device_count()} CUDA device(s)", ErrorCode.UNAVAILABLE)
    return torch.device("cuda", context.device_id)


class PytorchInstance(TensorInstance):
    """Runs ``forward`` on its device; with KIND_GPU on its own CUDA stream, like Triton."""

    device_inputs = True  # inputs in CUDA shared memory reach the model as device tensors

    def __init__(self, model: PytorchModel, context: InstanceContext) -> None:
        super().__init__(context.config)
        self.instance_name = context.name
        self.parameters = model.parameters
        self.device = device_for(context)
        module = model.module_for(self.device)
        schema = torchscript.schema_of(module)
        config = context.config
        binding = model.binding_for(schema, config)
        added = AddedTensors.of(config)
        self.call: Call | None = Call(
            model.name,
            module,
            binding,
            schema.returns,
            [*config.input, *added.inputs],
            [*config.output, *added.extra_outputs(config.output)],
            batching=self.batching,
            input_device=self.device,
        )
        self.cuda = self.device is not None and self.device.type == "cuda"
        self.stream = torch.cuda.Stream(device=self.device) if self.cuda else None  # type: ignore[no-untyped-call]
        # KIND_MODEL places tensors itself; it may use any visible GPU.
        self.may_use_cuda = self.cuda or (self.device is None and torch.cuda.is_available())

    def run(self, inputs: dict[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
        call = self.call
        if call is None:
            raise NaiadError(f"instance '{self.instance_name}' of model '{self.model_name}' was finalized")
        settings.apply_execution_flags(self.parameters)
        try:
            with self._on_device(), torch.inference_mode(self.parameters.inference_mode), torch.no_grad():
                return call(inputs)
        finally:
            if self.parameters.cache_cleaning and self.may_use_cuda:
                torch.cuda.empty_cache()

    @contextlib.contextmanager
    def _on_device(self) -> Iterator[None]:
        if self.stream is None:
            yield
            return
        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            yield

    def finalize(self) -> None:
        self.call = None
        self.stream = None
        if self.may_use_cuda:
            torch.cuda.empty_cache()
