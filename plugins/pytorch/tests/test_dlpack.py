"""Torch tensors as naiad tensors through DLPack: zero-copy on the host, device tensors served by copy.

A backend may answer with framework tensors wherever they live (``Tensor.from_dlpack``); the frontends
copy device memory to the host only when they encode the response. On a machine without CUDA the
device path runs with CPU torch tensors standing in for device memory; the CUDA test runs it for real.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import (
    BackendModel,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    MemoryKind,
    ModelInstance,
    ModelLoadContext,
    Tensor,
    hookimpl,
)
from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

CONFIG = """
backend: "torchout"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "H" data_type: TYPE_BF16 dims: [ 4 ] } ]
"""


class TorchOutputs(ModelInstance):
    """Answers Y = 2X and H = X as bfloat16, both as torch tensors on ``device``."""

    def __init__(self, device: str, memory: MemoryKind) -> None:
        self.device = device
        self.memory = memory

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            # The input's buffer, no copy on the host.
            x = torch.utils.dlpack.from_dlpack(request.inputs["X"]).to(self.device)
            outputs = [
                Tensor("Y", "FP32", x * 2, self.memory),
                Tensor("H", "BF16", x.to(torch.bfloat16), self.memory),
            ]
            request.sender.send(InferenceResponse(outputs), final=True)


class TorchOutputsBackend:
    def __init__(self, device: str, memory: MemoryKind) -> None:
        self.device = device
        self.memory = memory

    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        return BackendModel()

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        return TorchOutputs(self.device, self.memory)


def _serve(tmp_path_factory: pytest.TempPathFactory, device: str, memory: MemoryKind) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("torchout") / "models")
    repository.add_model("doubler", CONFIG, {"1/.keep": ""})
    with serve_in_thread([repository.root], plugins={"torchout": TorchOutputsBackend(device, memory)}) as server:
        yield server


def _check_served(server: ThreadedServer) -> None:
    x = np.array([1.0, -2.0, 3.5, 0.25], dtype=np.float32)
    bf16_bits = (torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)).tolist()
    http = httpclient.InferInput("X", [4], "FP32")
    http.set_data_from_numpy(x)
    wanted = [httpclient.InferRequestedOutput("Y", binary_data=False), httpclient.InferRequestedOutput("H")]
    result = httpclient.InferenceServerClient(server.http_url).infer("doubler", [http], outputs=wanted)
    np.testing.assert_array_equal(result.as_numpy("Y"), x * 2)
    grpc_input = grpcclient.InferInput("X", [4], "FP32")
    grpc_input.set_data_from_numpy(x)
    grpc_result = grpcclient.InferenceServerClient(server.grpc_url).infer("doubler", [grpc_input])
    np.testing.assert_array_equal(grpc_result.as_numpy("Y"), x * 2)
    raw = grpc_result.get_response().raw_output_contents[1]
    assert np.frombuffer(raw, dtype=np.uint16).tolist() == bf16_bits


def test_host_torch_tensors_share_their_buffer_both_ways() -> None:
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    tensor = Tensor.from_dlpack("X", source)
    assert (tensor.memory, tensor.datatype, tensor.shape) == (MemoryKind.HOST, "FP32", (2, 3))
    assert np.shares_memory(tensor.numpy(), source.numpy())
    back = torch.utils.dlpack.from_dlpack(tensor)
    back[0, 0] = 42.0
    assert source[0, 0].item() == 42.0


@pytest.fixture(scope="module")
def device_kind_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    # Without CUDA, CPU torch tensors labelled GPU take the device path: copied to the host by torch.
    yield from _serve(tmp_path_factory, "cpu", MemoryKind.GPU)


def test_device_kind_outputs_are_copied_to_the_host_when_encoded(device_kind_server: ThreadedServer) -> None:
    _check_served(device_kind_server)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_wrap_without_a_copy_and_serve(tmp_path_factory: pytest.TempPathFactory) -> None:
    source = torch.arange(4, dtype=torch.float16, device="cuda")
    tensor = Tensor.from_dlpack("X", source)
    assert (tensor.memory, tensor.device_id, tensor.datatype) == (MemoryKind.GPU, 0, "FP16")
    assert tensor.__cuda_array_interface__["data"][0] == source.data_ptr()
    np.testing.assert_array_equal(tensor.numpy(), np.arange(4, dtype=np.float16))
    for server in _serve(tmp_path_factory, "cuda", MemoryKind.GPU):
        _check_served(server)
