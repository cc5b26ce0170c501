"""The classification extension over HTTP and gRPC, with the answers a real Triton 2.51 gives.

Every expected string below is what Triton 2.51 returned for the same model and request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor(t.name().replace("IN", "OUT"), t.as_numpy()) for t in request.inputs()]
            )
            for request in requests
        ]
"""

SCORES = """
max_batch_size: 4
input [ { name: "IN_F" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "IN_I" data_type: TYPE_INT32 dims: [ 4 ] },
        { name: "IN_H" data_type: TYPE_FP16 dims: [ 4 ] }, { name: "IN_B" data_type: TYPE_BOOL dims: [ 4 ] },
        { name: "IN_S" data_type: TYPE_STRING dims: [ 4 ] }, { name: "IN_U" data_type: TYPE_UINT8 dims: [ 2, 2 ] },
        { name: "IN_D" data_type: TYPE_FP64 dims: [ 4 ] } ]
output [ { name: "OUT_F" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" },
         { name: "OUT_I" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "OUT_H" data_type: TYPE_FP16 dims: [ 4 ] },
         { name: "OUT_B" data_type: TYPE_BOOL dims: [ 4 ] }, { name: "OUT_S" data_type: TYPE_STRING dims: [ 4 ] },
         { name: "OUT_U" data_type: TYPE_UINT8 dims: [ 2, 2 ] }, { name: "OUT_D" data_type: TYPE_FP64 dims: [ 4 ] } ]
"""

FLAT = """
max_batch_size: 0
input [ { name: "IN_F" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
output [ { name: "OUT_F" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
"""

LABELLED = """
max_batch_size: 0
input [ { name: "IN_F" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
output [ { name: "OUT_F" data_type: TYPE_FP32 dims: [ 2, 3 ] label_filename: "labels.txt" } ]
"""
LABELS = "a\nb\nc\nd\ne\nf\n"

# An ensemble output without a label file of its own: Triton labels it from the step that makes it.
LABELLED_ENSEMBLE = """
platform: "ensemble"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] }} ]
output [ {{ name: "E_OUT" data_type: TYPE_FP32 dims: [ 2, 3 ] }} ]
ensemble_scheduling {{
  step [ {{ model_name: "{step}" model_version: -1 input_map {{ key: "IN_F" value: "X" }}
           output_map {{ key: "OUT_F" value: "E_OUT" }} }} ]
}}
"""

INPUTS = {
    "IN_F": np.array([[0.5, 2.25, -1, 3], [9, 8, 7, 6]], dtype=np.float32),
    "IN_I": np.array([[5, 1, 9, 3], [0, 0, 0, 0]], dtype=np.int32),
    "IN_H": np.arange(8, dtype=np.float16).reshape(2, 4),
    "IN_B": np.array([[True, False] * 2] * 2),
    "IN_S": np.full((2, 4), b"a", dtype=np.object_),
    "IN_U": np.array([[[1, 2], [3, 4]], [[8, 7], [6, 5]]], dtype=np.uint8),
    "IN_D": np.array([[0.1, 0.2, 0.3, 0.4], [1e10, 2.5, -3.25, 1 / 3]], dtype=np.float64),
}
DATATYPES = {"IN_F": "FP32", "IN_I": "INT32", "IN_H": "FP16", "IN_B": "BOOL", "IN_S": "BYTES", "IN_U": "UINT8"}

EXPECTED = {
    ("OUT_F", 2): [["3.000000:3", "2.250000:1:dog"], ["9.000000:0:cat", "8.000000:1:dog"]],
    ("OUT_F", 10): [
        ["3.000000:3", "2.250000:1:dog", "0.500000:0:cat", "-1.000000:2:bird"],
        ["9.000000:0:cat", "8.000000:1:dog", "7.000000:2:bird", "6.000000:3"],
    ],
    ("OUT_I", 3): [["9:2", "5:0", "3:3"], ["0:0", "0:1", "0:2"]],
    ("OUT_U", 3): [["4:3", "3:2", "2:1"], ["8:0", "7:1", "6:2"]],
    ("OUT_D", 3): [
        ["0.400000:3", "0.300000:2", "0.200000:1"],
        ["10000000000.000000:0", "2.500000:1", "0.333333:3"],
    ],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("classification") / "models")
    repository.add_model(
        "scores", f'backend: "python"\n{SCORES}', {"1/model.py": ECHO, "labels.txt": "cat\ndog\nbird\n"}
    )
    repository.add_model("flat", f'backend: "python"\n{FLAT}', {"1/model.py": ECHO})
    repository.add_model("labelled", f'backend: "python"\n{LABELLED}', {"1/model.py": ECHO, "labels.txt": LABELS})
    repository.add_model("labelled_ensemble", LABELLED_ENSEMBLE.format(step="labelled"), {"1/.keep": ""})
    nested = LABELLED_ENSEMBLE.format(step="labelled_ensemble").replace('"IN_F"', '"X"').replace('"OUT_F"', '"E_OUT"')
    repository.add_model("nested_ensemble", nested, {"1/.keep": ""})
    running = start_server([repository.root])
    yield running
    running.stop()


def _http_inputs() -> list[httpclient.InferInput]:
    inputs = []
    for name, array in INPUTS.items():
        tensor = httpclient.InferInput(name, list(array.shape), DATATYPES.get(name, "FP64"))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def _grpc_inputs() -> list[grpcclient.InferInput]:
    inputs = []
    for name, array in INPUTS.items():
        tensor = grpcclient.InferInput(name, list(array.shape), DATATYPES.get(name, "FP64"))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


@pytest.mark.parametrize(("output", "count"), list(EXPECTED))
@pytest.mark.parametrize("binary", [False, True])
def test_http_top_classes_per_batch_item(server: ServerProcess, output: str, count: int, binary: bool) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    wanted = [httpclient.InferRequestedOutput(output, binary_data=binary, class_count=count)]
    result = client.infer("scores", _http_inputs(), outputs=wanted)
    (entry,) = result.get_response()["outputs"]
    expected = EXPECTED[(output, count)]
    assert (entry["datatype"], entry["shape"]) == ("BYTES", [2, len(expected[0])])
    assert [[item.decode() if binary else item for item in row] for row in result.as_numpy(output).tolist()] == expected


@pytest.mark.parametrize(("output", "count"), list(EXPECTED))
def test_grpc_top_classes_per_batch_item(server: ServerProcess, output: str, count: int) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    wanted = [grpcclient.InferRequestedOutput(output, class_count=count)]
    result = client.infer("scores", _grpc_inputs(), outputs=wanted)
    expected = EXPECTED[(output, count)]
    assert (result.get_response().outputs[0].datatype, list(result.get_response().outputs[0].shape)) == (
        "BYTES",
        [2, len(expected[0])],
    )
    assert [[item.decode() for item in row] for row in result.as_numpy(output).tolist()] == expected


@pytest.mark.parametrize("output", ["OUT_H", "OUT_B", "OUT_S"])
def test_outputs_without_classes_are_refused(server: ServerProcess, output: str) -> None:
    datatype = {"OUT_H": "FP16", "OUT_B": "BOOL", "OUT_S": "BYTES"}[output]
    message = f"class result not available for output due to unsupported type '{datatype}'"
    with pytest.raises(InferenceServerException) as http_error:
        httpclient.InferenceServerClient(server.http_url).infer(
            "scores", _http_inputs(), outputs=[httpclient.InferRequestedOutput(output, class_count=2)]
        )
    assert (http_error.value.status(), http_error.value.message()) == ("400", message)
    with pytest.raises(InferenceServerException) as grpc_error:
        grpcclient.InferenceServerClient(server.grpc_url).infer(
            "scores", _grpc_inputs(), outputs=[grpcclient.InferRequestedOutput(output, class_count=2)]
        )
    assert (grpc_error.value.status(), grpc_error.value.message()) == ("StatusCode.INVALID_ARGUMENT", message)


def _flat(server: ServerProcess, outputs: list[dict[str, object]] | None, **parameters: object) -> httpx.Response:
    body: dict[str, object] = {
        "inputs": [{"name": "IN_F", "shape": [2, 3], "datatype": "FP32", "data": [1, 5, 3, 9, 2, 4]}]
    }
    if outputs is not None:
        body["outputs"] = outputs
    if parameters:
        body["parameters"] = parameters
    return httpx.post(f"http://{server.http_url}/v2/models/flat/infer", content=json.dumps(body))


def test_a_model_that_does_not_batch_ranks_its_whole_output(server: ServerProcess) -> None:
    response = _flat(server, [{"name": "OUT_F", "parameters": {"classification": 4}}])
    assert response.json()["outputs"] == [
        {
            "name": "OUT_F",
            "datatype": "BYTES",
            "shape": [4],
            "data": ["9.000000:3", "5.000000:1", "4.000000:5", "3.000000:2"],
        }
    ]
    assert _flat(server, [{"name": "OUT_F", "parameters": {"classification": 0}}]).json()["outputs"][0]["data"] == [
        1.0,
        5.0,
        3.0,
        9.0,
        2.0,
        4.0,
    ]


@pytest.mark.parametrize("model", ["labelled", "labelled_ensemble", "nested_ensemble"])
@pytest.mark.parametrize("client_module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_an_ensemble_output_takes_its_steps_labels(server: ServerProcess, model: str, client_module: Any) -> None:
    url = server.http_url if client_module is httpclient else server.grpc_url
    client = client_module.InferenceServerClient(url)
    name = "IN_F" if model == "labelled" else "X"
    output = "OUT_F" if model == "labelled" else "E_OUT"
    tensor = client_module.InferInput(name, [2, 3], "FP32")
    tensor.set_data_from_numpy(np.array([[1, 5, 3], [9, 2, 4]], dtype=np.float32))
    result = client.infer(model, [tensor], outputs=[client_module.InferRequestedOutput(output, class_count=2)])
    client.close()
    assert result.as_numpy(output).tolist() == [b"9.000000:3:d", b"5.000000:1:b"]


@pytest.mark.parametrize("count", [-1, 1.5, True, "2"])
def test_http_counts_that_are_not_unsigned_integers_are_refused(server: ServerProcess, count: object) -> None:
    response = _flat(server, [{"name": "OUT_F", "parameters": {"classification": count}}])
    assert (response.status_code, response.json()) == (
        500,
        {"error": "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer"},
    )


def test_binary_data_output_covers_only_requests_that_list_no_outputs(server: ServerProcess) -> None:
    listed = _flat(server, [{"name": "OUT_F"}], binary_data_output=True)
    assert "inference-header-content-length" not in listed.headers
    assert listed.json()["outputs"][0]["data"] == [1.0, 5.0, 3.0, 9.0, 2.0, 4.0]
    classes = _flat(server, [{"name": "OUT_F", "parameters": {"classification": 2}}], binary_data_output=True)
    assert classes.json()["outputs"][0]["data"] == ["9.000000:3", "5.000000:1"]
    everything = _flat(server, None, binary_data_output=True)
    assert int(everything.headers["inference-header-content-length"]) < len(everything.content)


def test_classification_values_below_one_are_refused_over_grpc(server: ServerProcess) -> None:
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    request = service_pb2.ModelInferRequest(model_name="flat")
    request.inputs.add(name="IN_F", datatype="FP32", shape=[2, 3])
    request.raw_input_contents.append(np.array([1, 5, 3, 9, 2, 4], dtype=np.float32).tobytes())
    request.outputs.add(name="OUT_F").parameters["classification"].int64_param = 0
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request)
    assert (caught.value.code(), caught.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value for 'classification' parameter, expected >= 0",
    )


def test_a_missing_label_file_fails_the_load(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Before any instance starts, as in Triton: the model's ``initialize`` never runs."""
    root = tmp_path_factory.mktemp("labels")
    marker = root / "initialized"
    started = ECHO.replace(
        "class TritonPythonModel:",
        f"class TritonPythonModel:\n    def initialize(self, args):\n        open({str(marker)!r}, 'w').close()\n",
    )
    repository = ModelRepositoryBuilder(root / "models")
    repository.add_model("unlabeled", f'backend: "python"\n{SCORES}', {"1/model.py": started})
    running = start_server([repository.root])
    try:
        (entry,) = httpclient.InferenceServerClient(running.http_url).get_model_repository_index()
    finally:
        running.stop()
    assert not marker.exists()
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] == (
        "Invalid argument: model 'unlabeled': cannot read label_filename 'labels.txt' of output 'OUT_F': No such "
        "file or directory; "
        "put the file in the model folder or remove the setting"
    )
