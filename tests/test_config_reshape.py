"""A config ``reshape``, as Triton applies it for every backend: the model gets each input in its
reshape form (variable dimensions carried over in order) and its outputs in their reshape form go
back to the ``dims`` clients see; an output that fits neither fails its response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

SHAPES_CONFIG = """
backend: "python"
max_batch_size: 4
input [
  { name: "FIXED" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } },
  { name: "VARIABLE" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape: { shape: [ -1, 2, 2 ] } },
  { name: "SCALAR" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }
]
output [
  { name: "FIXED_SHAPE" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "VARIABLE_SHAPE" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "SCALAR_SHAPE" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "VARIABLE_OUT" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape: { shape: [ -1, 2, 2 ] } }
]
"""

SHAPES = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for name in ("FIXED", "VARIABLE", "SCALAR"):
                data = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                outputs.append(pb_utils.Tensor(name + "_SHAPE", np.array([data.shape], dtype=np.int64)))
            variable = pb_utils.get_input_tensor_by_name(request, "VARIABLE").as_numpy()
            outputs.append(pb_utils.Tensor("VARIABLE_OUT", variable))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""

MISSHAPED_CONFIG = """
backend: "python"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
"""

ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("reshape") / "models")
    repository.add_python_model("shapes", SHAPES, SHAPES_CONFIG)
    repository.add_python_model("misshaped", ECHO, MISSHAPED_CONFIG)
    with serve_in_thread([repository.root]) as running:
        yield running


def _client(server: ThreadedServer, protocol: str) -> tuple[Any, Any]:
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(server.http_url)
    return grpcclient, grpcclient.InferenceServerClient(server.grpc_url)


def _inputs(module: Any, arrays: dict[str, np.ndarray[Any, Any]]) -> list[Any]:
    tensors = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_model_gets_inputs_in_their_reshape_and_clients_get_outputs_in_their_dims(
    server: ThreadedServer, protocol: str
) -> None:
    module, client = _client(server, protocol)
    variable = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    arrays = {
        "FIXED": np.zeros((2, 2, 2), np.float32),
        "VARIABLE": variable,
        "SCALAR": np.ones((2, 1), np.float32),
    }
    result = client.infer("shapes", _inputs(module, arrays))
    assert result.as_numpy("FIXED_SHAPE").tolist() == [[2, 4]]  # as Triton 2.51 hands them to the model
    assert result.as_numpy("VARIABLE_SHAPE").tolist() == [[2, 3, 2, 2]]
    assert result.as_numpy("SCALAR_SHAPE").tolist() == [[2]]
    out = result.as_numpy("VARIABLE_OUT")  # the model gave [2, 3, 2, 2]
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, variable)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_output_that_does_not_fit_its_reshape_fails_its_response(server: ThreadedServer, protocol: str) -> None:
    """Triton 2.51 sends such an output with a shape its data does not fill; naiad answers with an error."""
    module, client = _client(server, protocol)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("misshaped", _inputs(module, {"IN": np.ones((1, 3), np.float32)}))
    assert caught.value.message() == (
        "model 'misshaped' gave output 'OUT' with shape [1, 3], which does not fit its config: "
        "reshape [2, 2] (the shape the model gives), dims [4]"
    )
