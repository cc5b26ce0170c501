"""Broken TorchScript models: each fails alone, with a reason naming the model, file and tensor."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .models import TORCHSCRIPT_DEPRECATION, AddSub, DictOut, NamedArgs, add_torch_model, fp32, scripted

pytestmark = TORCHSCRIPT_DEPRECATION

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

# model name -> texts its load failure reason must contain
EXPECTED = {
    "missing_file": ["unable to find '", "missing_file/1/model.pt' for model 'missing_file'"],
    "corrupt_file": ["failed to load model 'corrupt_file': RuntimeError: PytorchStreamReader failed", "torch.jit.save"],
    "input_count": ["unable to load model 'input_count' (", "configuration expects 3 inputs, model provides 2"],
    "output_name": ["The output OUTPUT__2 in the model configuration refers to an output index which doesn't exist"],
    "string_type": ["input 'INPUT__1' is TYPE_STRING but forward argument 'INPUT__1' is a Tensor"],
    "unsupported_type": ["unsupported datatype TYPE_UINT64 for output 'OUTPUT__0'"],
    "output_dims": ["output 'double': config.pbtxt says dims [5], the model produces [3]"],
    "no_config": ["cannot auto-complete the configuration from '", 'input [ { name: "x" data_type: TYPE_<...>'],
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("pytorch-broken") / "models")
    add_torch_model(repository, "healthy", scripted(AddSub()), ADD_SUB)
    repository.add_model("missing_file", 'platform: "pytorch_libtorch"' + ADD_SUB, {"1/notes.txt": "no model"})
    repository.add_model("corrupt_file", ADD_SUB, {"1/model.pt": b"\x00garbage, not a zip archive"})
    three = ADD_SUB.replace(
        "dims: [ 4 ] }\n]\noutput", 'dims: [ 4 ] },\n{ name: "C" data_type: TYPE_FP32 dims: [ 4 ] }\n]\noutput'
    )
    add_torch_model(repository, "input_count", scripted(AddSub()), three)
    add_torch_model(repository, "output_name", scripted(AddSub()), ADD_SUB.replace('"OUTPUT__1"', '"OUTPUT__2"'))
    strings = ADD_SUB.replace("max_batch_size: 8", "max_batch_size: 0").replace(
        'name: "INPUT__1" data_type: TYPE_FP32', 'name: "INPUT__1" data_type: TYPE_STRING'
    )
    add_torch_model(repository, "string_type", scripted(AddSub()), strings)
    unsigned = ADD_SUB.replace('name: "OUTPUT__0" data_type: TYPE_FP32', 'name: "OUTPUT__0" data_type: TYPE_UINT64')
    add_torch_model(repository, "unsupported_type", scripted(AddSub()), unsigned)
    add_torch_model(
        repository,
        "output_dims",
        scripted(DictOut()),
        'max_batch_size: 2\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "double" dims: [ 5 ] } ]',
    )
    add_torch_model(repository, "no_config", scripted(NamedArgs()), None)
    server = start_server([repository.root], timeout=120)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_model_is_unavailable_with_its_reason(broken: ServerProcess, name: str) -> None:
    for client in (
        httpclient.InferenceServerClient(broken.http_url),
        grpcclient.InferenceServerClient(broken.grpc_url),
    ):
        with pytest.raises(InferenceServerException) as caught:
            client.get_model_metadata(name)
        assert "has no available versions" in str(caught.value.message())
        client.close()
    reasons = [line for line in broken.logs().splitlines() if f"model '{name}' version 1 failed to load" in line]
    assert reasons, broken.logs()
    for text in EXPECTED[name]:
        assert text in reasons[0]


def test_healthy_model_still_serves(broken: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(broken.http_url)
    a, b = fp32(1, 4), fp32(1, 4, seed=3)
    tensors = []
    for name, array in (("INPUT__0", a), ("INPUT__1", b)):
        tensor = httpclient.InferInput(name, [1, 4], "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    np.testing.assert_allclose(client.infer("healthy", tensors).as_numpy("OUTPUT__0"), a + b)
