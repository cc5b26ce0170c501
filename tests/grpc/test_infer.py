"""ModelInfer with the real tritonclient.grpc (sync and aio) and with typed contents."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.testing import ServerProcess


@pytest.fixture
def client(grpc_server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    with grpcclient.InferenceServerClient(grpc_server.grpc_url) as client:
        yield client


@pytest.fixture
def stub(grpc_server: ServerProcess) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_server.grpc_url))


def _add_sub_inputs(shape: tuple[int, ...] = (4,)) -> tuple[list[grpcclient.InferInput], np.ndarray, np.ndarray]:
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    b = np.full(shape, 0.5, dtype=np.float32)
    inputs = [
        grpcclient.InferInput("INPUT0", list(shape), "FP32"),
        grpcclient.InferInput("INPUT1", list(shape), "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs, a, b


def test_add_sub_returns_all_outputs_in_raw_contents(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs()
    outputs = [grpcclient.InferRequestedOutput(name) for name in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "req-7")
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [
        ("OUTPUT0", "FP32", [4]),
        ("OUTPUT1", "FP32", [4]),
    ]
    assert len(response.raw_output_contents) == 2
    assert not any(o.HasField("contents") for o in response.outputs)


def test_without_requested_outputs_every_output_comes_back(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs()
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_asking_for_one_output_returns_only_that_one(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs()
    result = client.infer("add_sub", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert [output.name for output in result.get_response().outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.as_numpy("OUTPUT0") is None


def test_an_output_asked_for_twice_comes_back_once(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _typed_add_sub_request()
    request.outputs.add(name="OUTPUT0")
    request.outputs.add(name="OUTPUT0")
    response = stub.ModelInfer(request, timeout=30)
    assert [output.name for output in response.outputs] == ["OUTPUT0"]


def test_batching_model_takes_several_rows(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs(shape=(3, 4))
    result = client.infer("add_sub_batch", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert result.as_numpy("OUTPUT0").shape == (3, 4)


def test_explicit_version_is_served(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs()
    result = client.infer("add_sub", inputs, model_version="1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response().model_version == "1"


def test_scheduling_and_custom_parameters_are_accepted(client: grpcclient.InferenceServerClient) -> None:
    """tritonclient sends priority as uint64_param; custom keys pass through to the model."""
    inputs, a, b = _add_sub_inputs()
    result = client.infer(
        "add_sub", inputs, priority=1, timeout=10_000_000, parameters={"mode": "fast", "level": 3, "on": True}
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_empty_final_response_flag_is_accepted_on_unary_infer(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    """perf_analyzer's C++ client sends it on every request."""
    request = _typed_add_sub_request()
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    request.parameters["binary_data_output"].bool_param = True  # HTTP's key: a custom one here
    response = stub.ModelInfer(request, timeout=30)
    assert np.frombuffer(response.raw_output_contents[0], dtype=np.float32).tolist() == [2.0, 3.0, 4.0, 5.0]
    assert "triton_final_response" not in response.parameters


def _round_trip(client: grpcclient.InferenceServerClient, model: str, data: np.ndarray, datatype: str) -> np.ndarray:
    tensor = grpcclient.InferInput("INPUT0", list(data.shape), datatype)
    tensor.set_data_from_numpy(data)
    result = client.infer(model, [tensor])
    assert result.get_response().outputs[0].datatype == datatype
    return result.as_numpy("OUTPUT0")


def test_bytes_round_trip_with_empty_strings(client: grpcclient.InferenceServerClient) -> None:
    data = np.array([b"hello", b"", "wörld".encode(), b""], dtype=np.object_)
    assert list(_round_trip(client, "identity_bytes", data, "BYTES")) == list(data)


def test_bytes_round_trip_keeps_non_utf8_bytes(client: grpcclient.InferenceServerClient) -> None:
    data = np.array([b"\xff\xfe\x00\x80", b"\x00", b"plain"], dtype=np.object_)
    assert list(_round_trip(client, "identity_bytes", data, "BYTES")) == list(data)


def test_bytes_model_with_batch(client: grpcclient.InferenceServerClient) -> None:
    data = np.array([[b"abc", b"xy"], [b"", b"\x01\x02"]], dtype=np.object_)
    tensor = grpcclient.InferInput("TEXT", [2, 2], "BYTES")
    tensor.set_data_from_numpy(data)
    output = client.infer("string_reverse", [tensor]).as_numpy("REVERSED")
    assert output.tolist() == [[b"cba", b"yx"], [b"", b"\x02\x01"]]


@pytest.mark.parametrize(
    ("model", "data", "datatype"),
    [
        ("identity_fp16", np.array([0.5, -1.25, 65504.0, 0.0], dtype=np.float16), "FP16"),
        ("identity_int64", np.array([2**62, -(2**62), 0, 7], dtype=np.int64), "INT64"),
        ("identity_bool", np.array([True, False, False, True, True]), "BOOL"),
        ("identity_uint8", np.array([0, 1, 200, 3], dtype=np.uint8), "UINT8"),
        ("identity_fp64", np.array([0.1, -2.5, 1e300], dtype=np.float64), "FP64"),
    ],
    ids=["fp16", "int64", "bool", "uint8", "fp64"],
)
def test_numeric_round_trips(
    client: grpcclient.InferenceServerClient, model: str, data: np.ndarray, datatype: str
) -> None:
    np.testing.assert_array_equal(_round_trip(client, model, data, datatype), data)


def test_compressed_request(client: grpcclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs()
    result = client.infer("add_sub", inputs, compression_algorithm="gzip")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_aio_client(grpc_server: ServerProcess) -> None:
    async def run() -> None:
        async with aioclient.InferenceServerClient(grpc_server.grpc_url) as client:
            assert await client.is_server_ready()
            assert (await client.get_model_metadata("add_sub")).name == "add_sub"
            inputs, a, b = _add_sub_inputs()
            results = await asyncio.gather(*(client.infer("add_sub", inputs, request_id=str(i)) for i in range(8)))
            for index, result in enumerate(results):
                assert result.get_response().id == str(index)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)

    asyncio.run(run())


# -- typed contents (Open Inference Protocol clients that do not use raw bytes) -----------------


def _typed_add_sub_request() -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", id="typed")
    first = request.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    first.contents.fp32_contents.extend([1, 2, 3, 4])
    second = request.inputs.add(name="INPUT1", datatype="FP32", shape=[4])
    second.contents.fp32_contents.extend([1, 1, 1, 1])
    return request


def test_typed_contents(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    response = stub.ModelInfer(_typed_add_sub_request(), timeout=30)
    assert response.id == "typed"
    assert np.frombuffer(response.raw_output_contents[0], dtype=np.float32).tolist() == [2, 3, 4, 5]
    assert np.frombuffer(response.raw_output_contents[1], dtype=np.float32).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("model", "datatype", "field", "values", "expected"),
    [
        ("identity_bytes", "BYTES", "bytes_contents", [b"a", b"", b"\xff"], b"\x01\0\0\0a\0\0\0\0\x01\0\0\0\xff"),
        ("identity_uint8", "UINT8", "uint_contents", [1, 255, 257], b"\x01\xff\x01"),  # truncated like Triton
        ("identity_bool", "BOOL", "bool_contents", [True, False], b"\x01\x00"),
        ("identity_int64", "INT64", "int64_contents", [-2], np.array([-2], "<i8").tobytes()),
        ("identity_fp64", "FP64", "fp64_contents", [0.25], np.array([0.25], "<f8").tobytes()),
    ],
    ids=["bytes", "uint8", "bool", "int64", "fp64"],
)
def test_typed_contents_of_each_type(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    model: str,
    datatype: str,
    field: str,
    values: list[object],
    expected: bytes,
) -> None:
    request = service_pb2.ModelInferRequest(model_name=model)
    tensor = request.inputs.add(name="INPUT0", datatype=datatype, shape=[len(values)])
    getattr(tensor.contents, field).extend(values)
    response = stub.ModelInfer(request, timeout=30)
    assert response.outputs[0].datatype == datatype
    assert response.raw_output_contents[0] == expected


def test_extra_raw_contents_are_ignored_like_triton(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    request.inputs.add(name="INPUT1", datatype="FP32", shape=[4])
    ones = np.ones(4, dtype=np.float32).tobytes()
    request.raw_input_contents.extend([ones, ones, b"spare"])
    response = stub.ModelInfer(request, timeout=30)
    assert np.frombuffer(response.raw_output_contents[0], dtype=np.float32).tolist() == [2, 2, 2, 2]
