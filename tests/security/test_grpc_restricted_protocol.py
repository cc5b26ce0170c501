"""Finding 5 on gRPC: ``--grpc-restricted-protocol`` guards each RPC group as Triton does.

Before, any client could call every RPC (load models, switch logging off). Now a call to a
restricted group without the agreed metadata (``triton-grpc-protocol-<key>: <value>``) ends with
Triton's UNAVAILABLE "This protocol is restricted, expecting header '<key>'" before its request is
read. The grouping and texts were checked against Triton 2.51 started with one restriction per group
(the same flags as the first server here): every RPC below was refused with its group's key and
only that one, and served with all keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from naiad.protocol import health_pb2, health_pb2_grpc
from naiad.testing import ServerProcess, start_server

from .grpc_helpers import (
    MIB,
    add_sub_request,
    build_repository,
    channel,
    count_request,
    proc_status,
    raw_infer,
    rpc_error,
)

GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)
Metadata = tuple[tuple[str, str], ...]


def _key(group: str) -> str:
    return f"triton-grpc-protocol-{group.replace('-', '')}key"


ALL_KEYS: Metadata = tuple((_key(group), f"{group}-value") for group in GROUPS)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("grpc-restricted") / "models")


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[ServerProcess]:
    flags = [f"--grpc-restricted-protocol={group}:{group.replace('-', '')}key={group}-value" for group in GROUPS]
    server = start_server([repository], *flags)
    yield server
    server.stop()


Call = Callable[[grpc.Channel, Metadata], object]


def _stub(target: grpc.Channel) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(target)


def _stream(target: grpc.Channel, metadata: Metadata) -> object:
    return list(_stub(target).ModelStreamInfer(iter([add_sub_request()]), metadata=metadata, timeout=10))


RPCS: dict[str, tuple[str, Call]] = {
    "ServerLive": ("health", lambda t, md: _stub(t).ServerLive(pb.ServerLiveRequest(), metadata=md)),
    "ServerReady": ("health", lambda t, md: _stub(t).ServerReady(pb.ServerReadyRequest(), metadata=md)),
    "ModelReady": ("health", lambda t, md: _stub(t).ModelReady(pb.ModelReadyRequest(name="count"), metadata=md)),
    "Health/Check": (
        "health",
        lambda t, md: health_pb2_grpc.HealthStub(t).Check(health_pb2.HealthCheckRequest(), metadata=md),
    ),
    "ServerMetadata": ("metadata", lambda t, md: _stub(t).ServerMetadata(pb.ServerMetadataRequest(), metadata=md)),
    "ModelMetadata": (
        "metadata",
        lambda t, md: _stub(t).ModelMetadata(pb.ModelMetadataRequest(name="count"), metadata=md),
    ),
    "ModelConfig": (
        "model-config",
        lambda t, md: _stub(t).ModelConfig(pb.ModelConfigRequest(name="count"), metadata=md),
    ),
    "ModelInfer": ("inference", lambda t, md: _stub(t).ModelInfer(add_sub_request(), metadata=md)),
    "ModelStreamInfer": ("inference", _stream),
    "ModelStatistics": (
        "statistics",
        lambda t, md: _stub(t).ModelStatistics(pb.ModelStatisticsRequest(name="count"), metadata=md),
    ),
    "RepositoryIndex": (
        "model-repository",
        lambda t, md: _stub(t).RepositoryIndex(pb.RepositoryIndexRequest(), metadata=md),
    ),
    "RepositoryModelLoad": (
        "model-repository",
        lambda t, md: _stub(t).RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="nope"), metadata=md),
    ),
    "RepositoryModelUnload": (
        "model-repository",
        lambda t, md: _stub(t).RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="nope"), metadata=md),
    ),
    "SystemSharedMemoryStatus": (
        "shared-memory",
        lambda t, md: _stub(t).SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), metadata=md),
    ),
    "SystemSharedMemoryRegister": (
        "shared-memory",
        lambda t, md: _stub(t).SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="x"), metadata=md),
    ),
    "SystemSharedMemoryUnregister": (
        "shared-memory",
        lambda t, md: _stub(t).SystemSharedMemoryUnregister(
            pb.SystemSharedMemoryUnregisterRequest(name="x"), metadata=md
        ),
    ),
    "CudaSharedMemoryStatus": (
        "shared-memory",
        lambda t, md: _stub(t).CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(), metadata=md),
    ),
    "CudaSharedMemoryRegister": (
        "shared-memory",
        lambda t, md: _stub(t).CudaSharedMemoryRegister(pb.CudaSharedMemoryRegisterRequest(name="x"), metadata=md),
    ),
    "CudaSharedMemoryUnregister": (
        "shared-memory",
        lambda t, md: _stub(t).CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest(name="x"), metadata=md),
    ),
    "TraceSetting": ("trace", lambda t, md: _stub(t).TraceSetting(pb.TraceSettingRequest(), metadata=md)),
    "LogSettings": ("logging", lambda t, md: _stub(t).LogSettings(pb.LogSettingsRequest(), metadata=md)),
}


def _outcome(call: Call, target: grpc.Channel, metadata: Metadata) -> tuple[grpc.StatusCode, str]:
    try:
        call(target, metadata)
    except grpc.RpcError as error:
        return error.code(), str(error.details())
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize("rpc", RPCS)
def test_each_rpc_is_guarded_by_its_group(server: ServerProcess, rpc: str) -> None:
    group, call = RPCS[rpc]
    refused = (grpc.StatusCode.UNAVAILABLE, f"This protocol is restricted, expecting header '{_key(group)}'")
    with grpc.insecure_channel(server.grpc_url) as target:
        assert _outcome(call, target, ()) == refused
        others = tuple(entry for entry in ALL_KEYS if entry[0] != _key(group))
        assert _outcome(call, target, others) == refused
        wrong = tuple((key, value + "x") for key, value in ALL_KEYS)
        assert _outcome(call, target, wrong) == refused
        # With its key the call is served (or answered as it would be without restrictions).
        assert "This protocol is restricted" not in _outcome(call, target, ALL_KEYS)[1]


def test_a_restricted_call_is_refused_before_its_request_is_read(server: ServerProcess) -> None:
    target = channel(server.grpc_url)
    peak = proc_status(server.process.pid, "VmHWM")
    error = rpc_error(lambda: raw_infer(target, count_request(128 * MIB)))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert (proc_status(server.process.pid, "VmHWM") - peak) / 1024 < 32  # the 128 MiB was never taken in


def test_open_groups_stay_open_and_logging_cannot_be_switched_off(repository: Path) -> None:
    server = start_server([repository], "--grpc-restricted-protocol=logging,model-repository:admin=s3cret")
    try:
        with grpc.insecure_channel(server.grpc_url) as target:
            stub = _stub(target)
            assert stub.ServerLive(pb.ServerLiveRequest()).live
            assert stub.ModelInfer(add_sub_request(2.0)).raw_output_contents
            silence = pb.LogSettingsRequest()
            silence.settings["log_error"].bool_param = False
            error = rpc_error(lambda: stub.LogSettings(silence))
            assert (error.code(), error.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                "This protocol is restricted, expecting header 'triton-grpc-protocol-admin'",
            )
            settings = stub.LogSettings(pb.LogSettingsRequest(), metadata=(("triton-grpc-protocol-admin", "s3cret"),))
            assert settings.settings["log_error"].bool_param is True
    finally:
        server.stop()
