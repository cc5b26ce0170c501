"""System shared memory over gRPC: tritonclient's helpers, the raw messages Triton 2.51 sends, streaming."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

from .conftest import Region

MISMATCH = (
    "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 64, got "
)
A = np.arange(16, dtype=np.float32).reshape(1, 16)
B = np.ones((1, 16), dtype=np.float32)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


@pytest.fixture
def stub(server: ServerProcess) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    with grpc.insecure_channel(server.grpc_url) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _error(call: object) -> InferenceServerException:
    assert callable(call)
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def _registered(
    client: grpcclient.InferenceServerClient, region: Region, size: int = 128
) -> tuple[str, shm.SharedMemoryRegion]:
    name, key, handle = region(size)
    client.register_system_shared_memory(name, key, size)
    return name, handle


def test_register_status_unregister(client: grpcclient.InferenceServerClient, region: Region) -> None:
    name, key, _ = region(128)
    client.register_system_shared_memory(name, key, 32, offset=64)
    status = client.get_system_shared_memory_status(name, as_json=True)
    assert status == {"regions": {name: {"name": name, "key": key, "offset": "64", "byte_size": "32"}}}
    assert name in client.get_system_shared_memory_status().regions
    client.unregister_system_shared_memory(name)
    assert client.get_system_shared_memory_status(as_json=True) == {}


def test_registration_errors_match_triton(client: grpcclient.InferenceServerClient, region: Region) -> None:
    name, key, _ = region(128)
    client.register_system_shared_memory(name, key, 128)
    duplicate = _error(lambda: client.register_system_shared_memory(name, key, 128))
    assert (duplicate.status(), duplicate.message()) == (
        "StatusCode.ALREADY_EXISTS",
        f"shared memory region '{name}' already in manager",
    )
    missing = _error(lambda: client.register_system_shared_memory("y", "/naiad_no_such_object", 8))
    assert missing.status() == "StatusCode.INTERNAL"
    assert missing.message().startswith("Unable to open shared memory region: '/naiad_no_such_object'")
    too_big = _error(lambda: client.register_system_shared_memory("y", key, 128, offset=8))
    assert too_big.status() == "StatusCode.INVALID_ARGUMENT"
    assert too_big.message().startswith("failed to register shared memory region 'y': invalid args")
    path = _error(lambda: client.register_system_shared_memory("y", "/dev/shm/x", 8))
    assert path.status() == "StatusCode.INVALID_ARGUMENT"
    unknown = _error(lambda: client.get_system_shared_memory_status("nope"))
    assert (unknown.status(), unknown.message()) == (
        "StatusCode.NOT_FOUND",
        "Unable to find system shared memory region: 'nope'",
    )
    client.unregister_system_shared_memory("nope")


def test_an_empty_region_name_is_refused_as_over_http(client: grpcclient.InferenceServerClient, region: Region) -> None:
    # Triton's gRPC endpoint registers it under "", a name status and unregister take for every region.
    _, key, _ = region(8)
    empty = _error(lambda: client.register_system_shared_memory("", key, 8))
    assert (empty.status(), empty.message()) == (
        "StatusCode.INVALID_ARGUMENT",
        "'region name' is necessary to register system shared memory region",
    )
    assert client.get_system_shared_memory_status(as_json=True) == {}


def test_infer_through_shared_memory(client: grpcclient.InferenceServerClient, region: Region) -> None:
    inputs, in_handle = _registered(client, region)
    outputs, out_handle = _registered(client, region)
    shm.set_shared_memory_region(in_handle, [A, B])
    first = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    first.set_shared_memory(inputs, 64)
    second = grpcclient.InferInput("INPUT1", [1, 16], "FP32")
    second.set_shared_memory(inputs, 64, offset=64)
    out0 = grpcclient.InferRequestedOutput("OUTPUT0")
    out0.set_shared_memory(outputs, 64)
    out1 = grpcclient.InferRequestedOutput("OUTPUT1")
    out1.set_shared_memory(outputs, 64, offset=64)
    client.infer("add_sub", [first, second], outputs=[out0, out1])
    written = shm.get_contents_as_numpy(out_handle, np.float32, [2, 16])
    np.testing.assert_array_equal(written, np.concatenate([A + B, A - B]))


def _message(inputs: str, outputs: str) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    tensor.parameters["shared_memory_region"].string_param = inputs
    tensor.parameters["shared_memory_byte_size"].int64_param = 64
    request.inputs.add(name="INPUT1", datatype="FP32", shape=[1, 16])
    request.raw_input_contents.append(np.full(16, 2, np.float32).tobytes())  # the first raw entry: INPUT1's
    output = request.outputs.add(name="OUTPUT0")
    output.parameters["shared_memory_region"].string_param = outputs
    output.parameters["shared_memory_byte_size"].int64_param = 64
    request.outputs.add(name="OUTPUT1")
    return request


def test_raw_contents_skip_shared_memory_tensors(
    client: grpcclient.InferenceServerClient, stub: service_pb2_grpc.GRPCInferenceServiceStub, region: Region
) -> None:
    """Raw inputs are counted over the inputs not in shared memory; a shared-memory output keeps its place in
    ``raw_output_contents`` with an empty entry, as Triton sends."""
    inputs, in_handle = _registered(client, region)
    outputs, out_handle = _registered(client, region)
    shm.set_shared_memory_region(in_handle, [A])
    response = stub.ModelInfer(_message(inputs, outputs))
    assert [output.name for output in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert [len(raw) for raw in response.raw_output_contents] == [0, 64]
    assert not response.outputs[0].parameters
    np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[1], np.float32), (A - 2)[0])
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [16]), (A + 2)[0])


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (
            lambda r: r.inputs[0].parameters["shared_memory_offset"].__setattr__("string_param", "0"),
            "INVALID_ARGUMENT",
            "invalid value type for 'shared_memory_offset' parameter for tensor 'INPUT0', expected int64_param.",
        ),
        (
            lambda r: r.inputs[0].parameters["shared_memory_region"].__setattr__("int64_param", 1),
            "INVALID_ARGUMENT",
            "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param.",
        ),
        (
            lambda r: r.inputs[0].parameters.__delitem__("shared_memory_byte_size"),
            "INVALID_ARGUMENT",
            "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor "
            "'INPUT0'",
        ),
        (
            lambda r: r.inputs[0].parameters["shared_memory_offset"].__setattr__("int64_param", -8),
            "INVALID_ARGUMENT",
            "Invalid offset for shared memory region: '{inputs}'",
        ),
        (
            lambda r: r.inputs[1].parameters["shared_memory_offset"].__setattr__("int64_param", 0),
            "INVALID_ARGUMENT",
            "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT1'",
        ),
        (
            lambda r: r.inputs[0].parameters["shared_memory_byte_size"].__setattr__("int64_param", 32),
            "INVALID_ARGUMENT",
            MISMATCH + "32",
        ),
        (  # data of the wrong size is refused after the model's checks, as for data in the message
            lambda r: (
                r.inputs[0].parameters["shared_memory_byte_size"].__setattr__("int64_param", 32),
                r.inputs[1].__setattr__("datatype", "INT32"),
            ),
            "INVALID_ARGUMENT",
            "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' expects "
            "'FP32'",
        ),
        (
            lambda r: r.inputs[0].parameters["shared_memory_offset"].__setattr__("int64_param", 100),
            "INVALID_ARGUMENT",
            "Invalid offset + byte size for shared memory region: '{inputs}'",
        ),
        (
            lambda r: r.inputs[0].parameters["shared_memory_region"].__setattr__("string_param", "nope"),
            "NOT_FOUND",
            "Unable to find shared memory region: 'nope'",
        ),
        (
            lambda r: r.outputs[0].parameters["classification"].__setattr__("int64_param", 2),
            "INVALID_ARGUMENT",
            "output can't set both 'shared_memory_region' and 'classification'",
        ),
        (
            lambda r: r.outputs[0].parameters["shared_memory_byte_size"].__setattr__("int64_param", 32),
            "INTERNAL",
            "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes "
            "to hold the results",
        ),
    ],
)
def test_errors_match_triton(
    client: grpcclient.InferenceServerClient,
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    region: Region,
    change: object,
    code: str,
    message: str,
) -> None:
    inputs, in_handle = _registered(client, region)
    outputs, _ = _registered(client, region)
    shm.set_shared_memory_region(in_handle, [A])
    request = _message(inputs, outputs)
    assert callable(change)
    change(request)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request)
    assert caught.value.code().name == code
    assert caught.value.details() == message.format(inputs=inputs)


def test_decoupled_stream_writes_each_response_into_the_region(
    client: grpcclient.InferenceServerClient, region: Region
) -> None:
    inputs, in_handle = _registered(client, region, 16)
    outputs, out_handle = _registered(client, region, 16)
    data = np.array([1, 2, 3, 4], np.float32)
    shm.set_shared_memory_region(in_handle, [data])
    results: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put(error or result))
    try:
        tensor = grpcclient.InferInput("INPUT0", [4], "FP32")
        tensor.set_shared_memory(inputs, 16)
        count = grpcclient.InferInput("COUNT", [1], "INT32")
        count.set_data_from_numpy(np.array([3], np.int32))
        requested = grpcclient.InferRequestedOutput("OUTPUT0")
        requested.set_shared_memory(outputs, 16)
        client.async_stream_infer("repeat", [tensor, count], outputs=[requested])
        for _ in range(3):
            result = results.get(timeout=30)
            assert isinstance(result, grpcclient.InferResult), result
            assert result.get_response().raw_output_contents == [b""]
    finally:
        client.stop_stream()
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [4]), data + 2)
