"""Tiny TorchScript models for the tests, and helpers to write them into model repositories."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess

# TorchScript is what this backend serves; torch >= 2.9 marks torch.jit.* deprecated. Every test
# module applies this mark so the suite also passes under the repository root's pytest config.
TORCHSCRIPT_DEPRECATION = pytest.mark.filterwarnings(
    "ignore:`torch\\.jit\\.(script|trace|trace_method|save|load)` is deprecated:DeprecationWarning"
)


class AddSub(torch.nn.Module):
    def forward(self, INPUT__0: torch.Tensor, INPUT__1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return INPUT__0 + INPUT__1, INPUT__0 - INPUT__1


class NamedArgs(torch.nn.Module):
    """``x * scale + 1``; the config lists ``scale`` before ``x`` to prove names, not order, bind."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale + 1


class Stats(torch.nn.Module):
    """A tuple of three outputs of different datatypes, per batch row."""

    def forward(self, data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return data * 2, data.sum(1, keepdim=True), data.argmax(1, keepdim=True)


class DictOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"double": x * 2, "total": x.sum(1, keepdim=True)}


class DictIn(torch.nn.Module):
    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return inputs["a"] - inputs["b"]


class Int64Affine(torch.nn.Module):
    def forward(self, INPUT__0: torch.Tensor) -> torch.Tensor:
        return INPUT__0 * 3 + 1


class Upper(torch.nn.Module):
    def forward(self, words: list[str]) -> list[str]:
        return [word.upper() for word in words]


class BatchSize(torch.nn.Module):
    """Doubles its input and reports the batch size each execution saw."""

    def forward(self, INPUT__0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.full((INPUT__0.shape[0], 1), INPUT__0.shape[0], dtype=torch.int64)
        return INPUT__0 * 2, rows


class MixedNames(torch.nn.Module):
    """Triton's io_names QA model: configs may name its inputs ``INPUT0`` and ``INPUT__1``."""

    def forward(self, INPUT0: torch.Tensor, INPUT1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return INPUT0 - INPUT1, INPUT0 + INPUT1


class Accumulate(torch.nn.Module):
    """A running sum kept in implicit state: ``OUTPUT = INPUT + state``, the state ignored at START."""

    def forward(
        self, INPUT__0: torch.Tensor, INPUT_STATE__1: torch.Tensor, START__2: torch.Tensor, READY__3: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keep = torch.logical_and(READY__3 != 0, START__2 == 0)
        total = INPUT__0 + INPUT_STATE__1 * keep
        return total, total


class Controls(torch.nn.Module):
    """Shows the sequence controls it was given: ``INPUT + START + 10 END + 100 READY``, and the CORRID."""

    def forward(
        self,
        INPUT__0: torch.Tensor,
        START__1: torch.Tensor,
        END__2: torch.Tensor,
        READY__3: torch.Tensor,
        CORRID__4: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return INPUT__0 + START__1 + END__2 * 10 + READY__3 * 100, CORRID__4


class RaggedOffsets(torch.nn.Module):
    """A ragged batch flattened into one vector, with the accumulated element count of each request:
    adds ``10 * <request's position in the batch>`` to each element."""

    def forward(self, X__0: torch.Tensor, COUNTS__1: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(X__0.shape[0], dtype=COUNTS__1.dtype)
        owner = torch.bucketize(positions, COUNTS__1.reshape(-1), right=True)
        return X__0 + owner.to(X__0.dtype) * 10


class Linear(torch.nn.Module):
    """A seeded linear layer, saved with ``torch.jit.trace``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.layer(x))


def scripted(module: torch.nn.Module) -> torch.jit.ScriptModule:
    return torch.jit.script(module.eval())


def traced(module: torch.nn.Module, *example: torch.Tensor) -> torch.jit.ScriptModule:
    return torch.jit.trace(module.eval(), example)  # type: ignore[no-untyped-call,no-any-return]


def save(module: torch.jit.ScriptModule, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.save(module, str(path))
    return path


def add_torch_model(
    repository: ModelRepositoryBuilder,
    name: str,
    module: torch.jit.ScriptModule,
    config: str | None,
    *,
    filename: str = "model.pt",
) -> Path:
    """``<repo>/<name>/config.pbtxt`` (unless None) and ``<repo>/<name>/1/<filename>``."""
    model_dir = repository.add_model(name, config)
    return save(module, model_dir / "1" / filename)


def reference(model_file: Path, *args: Any, **kwargs: Any) -> Any:
    """The model's own in-process result for numpy (or list) arguments."""
    module = torch.jit.load(str(model_file))  # type: ignore[no-untyped-call]
    converted = [torch.from_numpy(arg) if isinstance(arg, np.ndarray) else arg for arg in args]
    converted_kwargs = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    with torch.no_grad():
        return _numpy(module(*converted, **converted_kwargs))


def _numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
        return type(value)(_numpy(item) for item in value)
    if isinstance(value, dict):
        return {key: _numpy(item) for key, item in value.items()}
    return value


def fp32(*shape: int, seed: int = 0) -> npt.NDArray[np.float32]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def infer(
    client_module: ModuleType, server: ServerProcess, model: str, inputs: dict[str, tuple[npt.NDArray[Any], str]]
) -> Any:
    """One request over ``client_module`` (tritonclient.http or .grpc); returns the result object."""
    url = server.http_url if client_module is httpclient else server.grpc_url
    client = client_module.InferenceServerClient(url)
    tensors = []
    for name, (array, datatype) in inputs.items():
        tensor = client_module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    try:
        return client.infer(model, tensors)
    finally:
        client.close()
