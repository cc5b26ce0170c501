"""Bad ModelInfer requests get Triton 2.51's gRPC status and text, and the server keeps serving."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

from ..validation_cases import BAD_STRINGS, EMPTY_BATCHES, SEVERAL_MISTAKES, Mistakes, client_inputs, length_prefixed


@pytest.fixture
def client(grpc_server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    with grpcclient.InferenceServerClient(grpc_server.grpc_url) as client:
        yield client


@pytest.fixture
def stub(grpc_server: ServerProcess) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_server.grpc_url))


def _inputs(shape0: list[int], shape1: list[int], datatype1: str = "FP32") -> list[grpcclient.InferInput]:
    first = grpcclient.InferInput("INPUT0", shape0, "FP32")
    first.set_data_from_numpy(np.ones(shape0, dtype=np.float32))
    second = grpcclient.InferInput("INPUT1", shape1, datatype1)
    second.set_data_from_numpy(np.ones(shape1, dtype=np.float32 if datatype1 == "FP32" else np.int32))
    return [first, second]


def _assert_still_serving(client: grpcclient.InferenceServerClient) -> None:
    result = client.infer("add_sub", _inputs([4], [4]))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full(4, 2, dtype=np.float32))


def _refused(client: grpcclient.InferenceServerClient, *args: object, **kwargs: object) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        client.infer(*args, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_wrong_shape(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [5]))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'add_sub'. Expected [4], got [5]. "
    )
    _assert_still_serving(client)


def test_missing_batch_dimension_mentions_max_batch_size(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub_batch", _inputs([4], [4]))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert "Expected [-1,4], got [4]. NOTE: Setting a non-zero max_batch_size" in error.message()


def test_batch_larger_than_max_batch_size(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub_batch", _inputs([9, 4], [9, 4]))
    assert error.message() == (
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'add_sub_batch'"
    )


def test_wrong_datatype(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [4], "INT32"), request_id="r1")
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "[request id: r1] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' expects 'FP32'"
    )
    _assert_still_serving(client)


def test_missing_input(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [4])[:1])
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) "
        "['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."
    )
    _assert_still_serving(client)


def test_a_misnamed_input_is_named_as_in_triton(client: grpcclient.InferenceServerClient) -> None:
    misnamed = grpcclient.InferInput("INPUT9", [4], "FP32")
    misnamed.set_data_from_numpy(np.ones(4, dtype=np.float32))
    error = _refused(client, "add_sub", [_inputs([4], [4])[0], misnamed])  # as many inputs as the model takes
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == "unexpected inference input 'INPUT9' for model 'add_sub'"
    _assert_still_serving(client)


@pytest.mark.parametrize("case", EMPTY_BATCHES)
def test_inputs_leading_with_zero_items_are_sized_as_triton_sizes_them(
    client: grpcclient.InferenceServerClient, case: Mistakes
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer(case.model, client_inputs(grpcclient, case))
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert caught.value.message() == case.message
    _assert_still_serving(client)


@pytest.mark.parametrize("case", SEVERAL_MISTAKES)
def test_of_several_mistakes_the_one_triton_names_is_named(
    client: grpcclient.InferenceServerClient, case: Mistakes
) -> None:
    inputs = client_inputs(grpcclient, case)
    error = _refused(
        client, case.model, inputs, outputs=[grpcclient.InferRequestedOutput(name) for name in case.outputs] or None
    )
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == case.message


def test_unknown_output(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [4]), outputs=[grpcclient.InferRequestedOutput("NOPE")])
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == "unexpected inference output 'NOPE' for model 'add_sub'"


def test_unknown_model(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "no_such_model", _inputs([4], [4]))
    assert error.status() == "StatusCode.NOT_FOUND"
    assert error.message() == "Request for unknown model: 'no_such_model' is not found"
    _assert_still_serving(client)


def test_unknown_version(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [4]), model_version="7")
    assert error.status() == "StatusCode.NOT_FOUND"
    assert error.message() == "Request for unknown model: 'add_sub' version 7 is not found"


def test_non_numeric_version(client: grpcclient.InferenceServerClient) -> None:
    error = _refused(client, "add_sub", _inputs([4], [4]), model_version="latest")
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message().startswith("failed to get model version from specified version string 'latest'")


def test_decoupled_model_on_unary_infer(client: grpcclient.InferenceServerClient) -> None:
    """Refused before the inputs are even looked at (the INT64 input is wrong on purpose)."""
    tensor = grpcclient.InferInput("IN", [1], "INT64")
    tensor.set_data_from_numpy(np.array([2], dtype=np.int64))
    error = _refused(client, "repeat_int32", [tensor])
    assert error.status() == "StatusCode.UNIMPLEMENTED"
    assert error.message() == "ModelInfer RPC doesn't support models with decoupled transaction policy"
    _assert_still_serving(client)


def test_exception_in_execute_is_internal_for_that_request_only(client: grpcclient.InferenceServerClient) -> None:
    tensor = grpcclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    error = _refused(client, "raises_in_execute", [tensor])
    assert error.status() == "StatusCode.INTERNAL"
    assert error.message().startswith(
        "Failed to process the request(s) for model 'raises_in_execute_0', "
        "message: ValueError: cannot handle this input"
    )
    _assert_still_serving(client)


# -- raw protobuf requests: what tritonclient never sends ---------------------------------------


def _request(raw: list[bytes] | None = None, shape1: tuple[int, ...] = (4,)) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    request.inputs.add(name="INPUT1", datatype="FP32", shape=list(shape1))
    ones = np.ones(4, dtype=np.float32).tobytes()
    request.raw_input_contents.extend([ones, ones] if raw is None else raw)
    return request


def _status(stub: service_pb2_grpc.GRPCInferenceServiceStub, request: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request, timeout=30)
    return caught.value.code(), caught.value.details()


def _typed(second_field: str = "", values: tuple[object, ...] = ()) -> service_pb2.ModelInferRequest:
    """INPUT0 in typed contents; INPUT1 too when ``second_field`` is given."""
    request = _request(raw=[])
    request.inputs[0].contents.fp32_contents.extend([1, 2, 3, 4])
    if second_field:
        getattr(request.inputs[1].contents, second_field).extend(values)
    return request


INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("request_message", "expected"),
    [
        (
            _request(raw=[np.ones(4, dtype=np.float32).tobytes()]),
            "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
        ),
        (
            _request(raw=[np.ones(4, dtype=np.float32).tobytes(), bytes(12)]),
            "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. "
            "Expected 16, got 12",
        ),
        (
            _request(shape1=(-1,)),
            "[request id: <id_unknown>] All input dimensions should be specified for input 'INPUT1' "
            "for model 'add_sub', got [-1]",
        ),
        (
            _typed("int_contents", (1, 1, 1, 1)),
            "unexpected explicit tensor data for input tensor 'INPUT1' for model 'add_sub' of type 'INT32', "
            "expected datatype 'FP32'",
        ),
        (
            _typed("fp32_contents", (1, 1, 1)),
            "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. "
            "Expected 16, got 12",
        ),
        (
            _typed(),
            "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
        ),
    ],
    ids=["raw-missing", "raw-short", "negative-dim", "typed-wrong-field", "typed-short", "typed-missing"],
)
def test_malformed_tensor_data(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    client: grpcclient.InferenceServerClient,
    request_message: service_pb2.ModelInferRequest,
    expected: str,
) -> None:
    assert _status(stub, request_message) == (INVALID, expected)
    _assert_still_serving(client)


def _sized(inputs: list[tuple[str, str, int]], output: str = "") -> service_pb2.ModelInferRequest:
    """add_sub with raw inputs of shape [4]: each a name, a datatype and how many bytes it carries."""
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    for name, datatype, size in inputs:
        request.inputs.add(name=name, datatype=datatype, shape=[4])
        request.raw_input_contents.append(bytes(size))
    if output:
        request.outputs.add(name=output)
    return request


def _mismatch(name: str, size: int) -> str:
    return (
        f"[request id: <id_unknown>] input byte size mismatch for input '{name}' for model 'add_sub'. "
        f"Expected 16, got {size}"
    )


@pytest.mark.parametrize(
    ("request_message", "expected"),
    [  # Triton checks data sizes after the outputs, names, datatypes and shapes: what it answered
        (_sized([("INPUT0", "FP32", 12), ("X", "FP32", 16)]), "unexpected inference input 'X' for model 'add_sub'"),
        (
            _sized([("INPUT0", "FP32", 12), ("INPUT1", "INT32", 16)]),
            "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' "
            "expects 'FP32'",
        ),
        (
            _sized([("INPUT0", "FP32", 12), ("INPUT1", "FP32", 16)], output="NOPE"),
            "unexpected inference output 'NOPE' for model 'add_sub'",
        ),
        (_sized([("INPUT1", "FP32", 20), ("INPUT0", "FP32", 12)]), _mismatch("INPUT0", 12)),
        (_sized([("INPUT0", "FP32", 12), ("INPUT1", "FP32", 20)]), _mismatch("INPUT1", 20)),
    ],
    ids=["unknown-input", "wrong-datatype", "unknown-output", "two-sizes", "two-sizes-swapped"],
)
def test_a_data_size_mismatch_is_reported_after_the_models_checks(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, request_message: service_pb2.ModelInferRequest, expected: str
) -> None:
    assert _status(stub, request_message) == (INVALID, expected)


@pytest.mark.parametrize(("shape", "data", "expected"), BAD_STRINGS)
def test_bytes_data_is_walked_as_triton_walks_it(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, shape: list[int], data: bytes, expected: str
) -> None:
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="TEXT", datatype="BYTES", shape=shape)
    request = service_pb2.ModelInferRequest(model_name="string_reverse", inputs=[tensor], raw_input_contents=[data])
    assert _status(stub, request) == (INVALID, expected)


def test_bytes_data_is_refused_after_the_models_checks(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="TEXT", datatype="BYTES", shape=[9, 1])
    request = service_pb2.ModelInferRequest(
        model_name="string_reverse", inputs=[tensor], raw_input_contents=[length_prefixed(b"a")]
    )
    assert _status(stub, request) == (
        INVALID,
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'string_reverse'",
    )


def test_present_but_empty_contents_is_zero_bytes(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _typed()
    request.inputs[1].contents.SetInParent()
    assert _status(stub, request) == (
        INVALID,
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. "
        "Expected 16, got 0",
    )


def test_contents_and_raw_contents_together(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _request(raw=[np.ones(4, dtype=np.float32).tobytes()])
    request.inputs[0].contents.fp32_contents.extend([1, 2, 3, 4])
    assert _status(stub, request) == (
        INVALID,
        "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'add_sub'",
    )


def test_fp16_has_no_typed_field(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = service_pb2.ModelInferRequest(model_name="identity_fp16")
    request.inputs.add(name="INPUT0", datatype="FP16", shape=[2]).contents.fp32_contents.extend([1, 2])
    assert _status(stub, request) == (
        INVALID,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'identity_fp16' of type 'FP32', "
        "expected datatype 'FP16'",
    )


def test_unknown_datatype(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _request()
    request.inputs[1].datatype = "FOO"
    assert _status(stub, request) == (
        INVALID,
        "[request id: <id_unknown>] inference input 'INPUT1' data-type is '<invalid>', but model 'add_sub' "
        "expects 'FP32'",
    )


def test_duplicate_input(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _request()
    request.inputs[1].name = "INPUT0"
    assert _status(stub, request) == (INVALID, "[request id: <id_unknown>] input 'INPUT0' already exists in request")


def _with_parameter(key: str, **value: object) -> service_pb2.ModelInferRequest:
    request = _request()
    request.parameters[key].CopyFrom(service_pb2.InferParameter(**value))
    return request


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "sequence_start",
            {"int64_param": 1},
            "invalid value type for 'sequence_start' parameter, expected bool_param.",
        ),
        (
            "sequence_id",
            {"bool_param": True},
            "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
        ),
        (
            "priority",
            {"string_param": "x"},
            "invalid value type for 'priority' parameter, expected int64_param or uint64_param.",
        ),
        ("priority", {"int64_param": -1}, "invalid value for 'priority', expected value >= 0."),
        ("timeout", {"uint64_param": 5}, "invalid value type for 'timeout' parameter, expected int64_param."),
        (
            "triton_enable_empty_final_response",
            {"int64_param": 1},
            "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.",
        ),
        (
            "custom",
            {"uint64_param": 3},
            "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param.",
        ),
        (
            "custom",
            {},
            "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param.",
        ),
    ],
    ids=[
        "sequence_start",
        "sequence_id",
        "priority-type",
        "priority-negative",
        "timeout",
        "empty-final",
        "custom-uint64",
        "custom-unset",
    ],
)
def test_parameter_of_the_wrong_type(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, key: str, value: dict[str, object], expected: str
) -> None:
    assert _status(stub, _with_parameter(key, **value)) == (INVALID, expected)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("custom", {"double_param": 1.5}),
        ("sequence_id", {"int64_param": 5}),
        ("binary_data_output", {"int64_param": 1}),
        ("timeout", {"int64_param": -5}),  # Triton reads the bits as a uint64: a very long timeout
    ],
    ids=["custom-double", "sequence_id", "binary_data_output", "timeout-negative"],
)
def test_parameters_triton_accepts(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, key: str, value: dict[str, object]
) -> None:
    assert stub.ModelInfer(_with_parameter(key, **value), timeout=30).model_name == "add_sub"


def test_reserved_parameter_is_refused(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    """tritonclient refuses such keys itself; the data plane's rule answers other clients."""
    code, message = _status(stub, _with_parameter("triton_secret", bool_param=True))
    assert (code, message) == (  # Triton's gRPC words, which differ from its HTTP ones
        INVALID,
        "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
        "starting with 'triton_' are allowed: triton_enable_empty_final_response",
    )


def test_classification_counts_below_one_and_other_types_are_refused(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    request = _request()
    parameter = request.outputs.add(name="OUTPUT0").parameters["classification"]
    for count in (0, -3):
        parameter.int64_param = count
        assert _status(stub, request) == (INVALID, "invalid value for 'classification' parameter, expected >= 0")
    parameter.uint64_param = 2
    assert _status(stub, request) == (
        INVALID,
        "invalid value type for 'classification' parameter, expected int64_param",
    )


def test_an_unregistered_shared_memory_region_is_not_found(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = _request(raw=[np.ones(4, dtype=np.float32).tobytes()])
    request.inputs[1].parameters["shared_memory_region"].string_param = "region"
    request.inputs[1].parameters["shared_memory_byte_size"].int64_param = 16
    assert _status(stub, request) == (grpc.StatusCode.NOT_FOUND, "Unable to find shared memory region: 'region'")
