"""KIND_GPU and KIND_MODEL instances on a CUDA device (skipped where torch sees no CUDA device)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess, infer_through_shared_memory
from naiad_pytorch.instance import PytorchInstance

from .conftest import LoadModel
from .models import TORCHSCRIPT_DEPRECATION, AddSub, add_torch_model, fp32, reference, scripted

pytestmark = [
    TORCHSCRIPT_DEPRECATION,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

ADD_SUB = """
max_batch_size: 8
input [
  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""


class DevicePinned(torch.nn.Module):
    """Keeps its weight where it was saved and moves inputs there itself (KIND_MODEL style)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(4, dtype=torch.float32), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.weight.device) * self.weight


def test_kind_gpu_runs_on_its_device_and_answers_on_the_host(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    config = (
        ADD_SUB
        + """
    instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] } ]
    parameters { key: "ENABLE_CACHE_CLEANING" value: { string_value: "true" } }
    """
    )
    path = add_torch_model(model_repository, "gpu_add_sub", scripted(AddSub()), config)
    model = load("gpu_add_sub", gpu_count=torch.cuda.device_count())
    instance = model.instances[1]
    assert isinstance(instance, PytorchInstance)
    assert instance.device == torch.device("cuda", 0)
    assert instance.stream is not None
    a, b = fp32(3, 4, seed=1), fp32(3, 4, seed=2)
    outputs = model.infer({"INPUT__0": a, "INPUT__1": b}, instance=1)
    expected = reference(path, a, b)
    np.testing.assert_allclose(outputs["OUTPUT__0"], expected[0])
    np.testing.assert_allclose(outputs["OUTPUT__1"], expected[1])


def test_kind_model_keeps_the_files_placement(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    module = torch.jit.script(DevicePinned().to("cuda:0"))
    config = """
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    instance_group [ { kind: KIND_MODEL } ]
    """
    add_torch_model(model_repository, "pinned", module, config)
    model = load("pinned", gpu_count=torch.cuda.device_count())
    instance = model.instances[0]
    assert isinstance(instance, PytorchInstance)
    assert instance.device is None
    assert instance.call is not None
    assert next(instance.call.module.parameters()).device.type == "cuda"
    x = np.ones(4, np.float32)
    np.testing.assert_allclose(model.infer({"x": x})["OUTPUT__0"], [0.0, 1.0, 2.0, 3.0])


def test_server_serves_kind_gpu(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    path = add_torch_model(
        model_repository, "gpu", scripted(AddSub()), ADD_SUB + "instance_group [ { kind: KIND_GPU } ]"
    )
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url)
    a, b = fp32(2, 4, seed=3), fp32(2, 4, seed=4)
    tensors = []
    for name, array in (("INPUT__0", a), ("INPUT__1", b)):
        tensor = httpclient.InferInput(name, [2, 4], "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = client.infer("gpu", tensors)
    np.testing.assert_allclose(result.as_numpy("OUTPUT__1"), reference(path, a, b)[1])


def test_inputs_in_cuda_shared_memory_reach_the_model_on_the_device(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """The input's device memory is handed to forward() as a CUDA tensor; the output is copied device to
    device into the client's output region."""
    path = add_torch_model(
        model_repository, "gpu_shm", scripted(AddSub()), ADD_SUB + "instance_group [ { kind: KIND_GPU } ]"
    )
    server = naiad_server(model_repository.root)
    a, b = fp32(2, 4, seed=5), fp32(2, 4, seed=6)
    inputs = {"INPUT__0": a, "INPUT__1": b}
    written = infer_through_shared_memory(server.http_url, "http", "gpu_shm", inputs, cuda_device=0)
    expected = reference(path, a, b)
    np.testing.assert_allclose(written["OUTPUT__0"], expected[0])
    np.testing.assert_allclose(written["OUTPUT__1"], expected[1])
