"""Triton's PyTorch python runtime (``runtime: "model.py"``), served by the real server.

The models are eager ``nn.Module`` sources in ``model.py`` (with and without weights in ``model.pt``)
and a TorchScript file, compiled with ``torch.compile`` (the eager backend keeps the tests quick).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .conftest import LoadModel, load_error
from .models import TORCHSCRIPT_DEPRECATION, AddSub, fp32, infer, save, scripted

pytestmark = TORCHSCRIPT_DEPRECATION

CLIENTS = [pytest.param(httpclient, id="http"), pytest.param(grpcclient, id="grpc")]

EAGER = json.dumps({"backend": "eager"})

ADD_SUB_SOURCE = """
import torch


class AddSub(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a + b, a - b
"""

LINEAR_SOURCE = """
import torch
from torch.nn import Identity  # imported classes come after the one the file defines


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x) * 2
"""


def runtime_config(inputs: list[str], outputs: list[str], *, batch: int, dims: int, extra: str = "") -> str:
    tensors = ", ".join(f'{{ name: "{name}" data_type: TYPE_FP32 dims: [ {dims} ] }}' for name in inputs)
    results = ", ".join(f'{{ name: "{name}" data_type: TYPE_FP32 dims: [ -1 ] }}' for name in outputs)
    return (
        f'backend: "pytorch"\nruntime: "model.py"\nmax_batch_size: {batch}\ninput [ {tensors} ]\noutput [ {results} ]\n'
        f'parameters {{ key: "TORCH_COMPILE_OPTIONAL_PARAMETERS" value {{ string_value: {json.dumps(EAGER)} }} }}\n'
        + extra
    )


class Linear(torch.nn.Module):
    """The same layer as ``LINEAR_SOURCE``'s, to make its weights and the expected result."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.layer(x) * 2
        return result


def add_linear(repository: ModelRepositoryBuilder, name: str) -> Linear:
    torch.manual_seed(7)
    reference = Linear().eval()
    model_dir = repository.add_model(name, runtime_config(["x"], ["y"], batch=0, dims=4), {"1/model.py": LINEAR_SOURCE})
    torch.save(reference.state_dict(), model_dir / "1" / "model.pt")
    return reference


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Linear]]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("python_runtime") / "models")
    repository.add_model(
        "add_sub",
        runtime_config(["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"], batch=4, dims=3, extra="dynamic_batching { }"),
        {"1/model.py": ADD_SUB_SOURCE},
    )
    linear = add_linear(repository, "linear")
    model_dir = repository.add_model(
        "scripted", runtime_config(["INPUT__0", "INPUT__1"], ["OUTPUT__0", "OUTPUT__1"], batch=4, dims=3)
    )
    save(scripted(AddSub()), model_dir / "1" / "model.pt")
    server = start_server([repository.root], timeout=120)
    try:
        yield server, linear
    finally:
        server.stop()


@pytest.mark.parametrize("client_module", CLIENTS)
def test_module_source_runs_with_positional_inputs(
    served: tuple[ServerProcess, Linear], client_module: ModuleType
) -> None:
    server, _ = served
    a, b = fp32(2, 3, seed=1), fp32(2, 3, seed=2)
    result = infer(client_module, server, "add_sub", {"INPUT0": (a, "FP32"), "INPUT1": (b, "FP32")})
    np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + b, rtol=1e-6)
    np.testing.assert_allclose(result.as_numpy("OUTPUT1"), a - b, rtol=1e-6)


@pytest.mark.parametrize("client_module", CLIENTS)
def test_weights_come_from_model_pt(served: tuple[ServerProcess, Linear], client_module: ModuleType) -> None:
    server, linear = served
    x = fp32(4, seed=3)
    result = infer(client_module, server, "linear", {"x": (x, "FP32")})
    with torch.no_grad():
        expected = linear(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(result.as_numpy("y"), expected, rtol=1e-5)


def test_torchscript_file_under_the_python_runtime(served: tuple[ServerProcess, Linear]) -> None:
    server, _ = served
    a, b = fp32(3, 3, seed=4), fp32(3, 3, seed=5)
    result = infer(grpcclient, server, "scripted", {"INPUT__0": (a, "FP32"), "INPUT__1": (b, "FP32")})
    np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), a + b, rtol=1e-6)
    assert "Loading 'scripted' as TorchScript" in server.logs()


def test_config_keeps_runtime_and_no_default_file(served: tuple[ServerProcess, Linear]) -> None:
    server, _ = served
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("add_sub")
    client.close()
    assert config["runtime"] == "model.py"
    assert config["backend"] == "pytorch"
    assert config["default_model_filename"] == ""  # Triton leaves it empty for a python runtime


@pytest.mark.parametrize(
    ("files", "parameters", "message"),
    [
        ({"1/README": "empty"}, EAGER, "no model found in"),
        ({"1/model.py": "import torch\n"}, EAGER, "Cannot find a subclass of torch.nn.Module"),
        ({"1/model.py": "raise ValueError('broken')\n"}, EAGER, "failed: ValueError: broken"),
        ({"1/model.py": ADD_SUB_SOURCE}, '{"model": 1}', "'model' is not an optional parameter for 'torch.compile'"),
        ({"1/model.py": ADD_SUB_SOURCE}, "[1]", "must be a JSON object of torch.compile keyword arguments"),
    ],
    ids=["no-file", "no-module-class", "import-error", "model-option", "options-not-object"],
)
def test_load_failures_say_why(
    model_repository: ModelRepositoryBuilder,
    load: LoadModel,
    files: dict[str, str],
    parameters: str,
    message: str,
) -> None:
    config = runtime_config(["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"], batch=0, dims=3).replace(
        json.dumps(EAGER), json.dumps(parameters)
    )
    model_repository.add_model("broken", config, files)
    assert message in load_error(load, "broken")


def test_string_tensors_are_refused(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = runtime_config(["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"], batch=0, dims=3)
    model_repository.add_model("strings", config.replace("TYPE_FP32", "TYPE_STRING", 1), {"1/model.py": ADD_SUB_SOURCE})
    assert "passes tensors only; ['INPUT0'] are TYPE_STRING" in load_error(load, "strings")


def test_defined_class_wins_over_imported_ones(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    reference = add_linear(model_repository, "linear")
    x = fp32(4, seed=6)
    outputs = load("linear").infer({"x": x})
    with torch.no_grad():
        np.testing.assert_allclose(outputs["y"], reference(torch.from_numpy(x)).numpy(), rtol=1e-5)


def test_default_model_filename_comes_first(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = runtime_config(["INPUT__0", "INPUT__1"], ["OUTPUT__0", "OUTPUT__1"], batch=0, dims=3)
    model_dir = model_repository.add_model(
        "named_file",
        'default_model_filename: "net.pt"\n' + config,
        {"1/model.py": "raise ValueError('model.py is not read when default_model_filename names a file')\n"},
    )
    save(scripted(AddSub()), model_dir / "1" / "net.pt")
    a, b = fp32(3, seed=7), fp32(3, seed=8)
    outputs = load("named_file").infer({"INPUT__0": a, "INPUT__1": b})
    np.testing.assert_allclose(outputs["OUTPUT__1"], a - b, rtol=1e-6)
