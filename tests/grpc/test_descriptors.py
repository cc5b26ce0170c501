"""naiad's grpc_service.proto and health.proto against tritonclient's and the standard schema.

Only wire facts are compared (names, numbers, types, labels, referenced type names, oneofs,
streaming flags): naiad's .proto files keep their own comments and layout. Both sets of
modules are imported in this one process; naiad's live in a private descriptor pool.
(With --import-mode=importlib test modules cannot import each other, so this walker is
separate from the one in tests/config/test_proto.py.)
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import tritonclient.grpc.model_config_pb2 as triton_config
import tritonclient.grpc.service_pb2 as triton_service
from google.protobuf.descriptor import FieldDescriptor

from naiad.protocol import _pool, grpc_service_pb2, health_pb2, model_config_pb2


def _field(field: FieldDescriptor) -> dict[str, Any]:
    return {
        "number": field.number,
        "type": field.type,
        "repeated": field.is_repeated,
        "message": field.message_type.full_name if field.message_type else None,
        "enum": field.enum_type.full_name if field.enum_type else None,
        "oneof": field.containing_oneof.name if field.containing_oneof else None,
        "json_name": field.json_name,
        "presence": field.has_presence,
    }


def _enums(owner: Any) -> dict[str, dict[str, int]]:
    return {e.full_name: {v.name: v.number for v in e.values} for e in owner.enum_types_by_name.values()}


def _messages(owner: Any, into: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every message under ``owner`` (a file or a message), nested ones included, by full name."""
    types = owner.message_types_by_name if hasattr(owner, "message_types_by_name") else owner.nested_types_by_name
    for message in types.values():
        into[message.full_name] = {
            "map_entry": message.GetOptions().map_entry,
            "fields": {f.name: _field(f) for f in message.fields},
            "oneofs": {o.name: sorted(f.name for f in o.fields) for o in message.oneofs},
            "enums": _enums(message),
        }
        _messages(message, into)
    return into


def _services(file: Any) -> dict[str, dict[str, tuple[str, str, bool, bool]]]:
    return {
        service.full_name: {
            method.name: (
                method.input_type.full_name,
                method.output_type.full_name,
                method.client_streaming,
                method.server_streaming,
            )
            for method in service.methods
        }
        for service in file.services_by_name.values()
    }


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [(grpc_service_pb2, triton_service), (model_config_pb2, triton_config)],
    ids=["grpc_service", "model_config"],
)
def test_messages_match_tritonclient(ours: Any, theirs: Any) -> None:
    assert (ours.DESCRIPTOR.name, ours.DESCRIPTOR.package) == (theirs.DESCRIPTOR.name, theirs.DESCRIPTOR.package)
    assert [d.name for d in ours.DESCRIPTOR.dependencies] == [d.name for d in theirs.DESCRIPTOR.dependencies]
    mine, reference = _messages(ours.DESCRIPTOR, {}), _messages(theirs.DESCRIPTOR, {})
    assert sorted(mine) == sorted(reference)
    for name, message in mine.items():
        assert message == reference[name], name
    assert _enums(ours.DESCRIPTOR) == _enums(theirs.DESCRIPTOR)


def test_service_matches_tritonclient() -> None:
    services = _services(grpc_service_pb2.DESCRIPTOR)
    assert services == _services(triton_service.DESCRIPTOR)
    methods = services["inference.GRPCInferenceService"]
    assert len(methods) == 20
    assert methods["ModelStreamInfer"] == (
        "inference.ModelInferRequest",
        "inference.ModelStreamInferResponse",
        True,
        True,
    )


def test_health_is_the_standard_check() -> None:
    assert health_pb2.DESCRIPTOR.package == "grpc.health.v1"
    assert _services(health_pb2.DESCRIPTOR) == {
        "grpc.health.v1.Health": {
            "Check": ("grpc.health.v1.HealthCheckRequest", "grpc.health.v1.HealthCheckResponse", False, False)
        }
    }
    messages = _messages(health_pb2.DESCRIPTOR, {})
    assert messages["grpc.health.v1.HealthCheckRequest"]["fields"]["service"]["number"] == 1
    status = messages["grpc.health.v1.HealthCheckResponse"]
    assert status["fields"]["status"]["enum"] == "grpc.health.v1.HealthCheckResponse.ServingStatus"
    assert status["enums"] == {
        "grpc.health.v1.HealthCheckResponse.ServingStatus": {
            "UNKNOWN": 0,
            "SERVING": 1,
            "NOT_SERVING": 2,
            "SERVICE_UNKNOWN": 3,
        }
    }


def test_descriptors_live_in_the_private_pool() -> None:
    for module in (grpc_service_pb2, health_pb2):
        assert module.DESCRIPTOR.pool is _pool.POOL
    assert triton_service.DESCRIPTOR.pool is not _pool.POOL
    config_field = grpc_service_pb2.ModelConfigResponse.DESCRIPTOR.fields_by_name["config"]
    assert config_field.message_type is model_config_pb2.ModelConfig.DESCRIPTOR
    assert grpc_service_pb2.ModelInferRequest.__module__ == "naiad.protocol.grpc_service_pb2"


def test_wire_compatible_with_tritonclient() -> None:
    ours = grpc_service_pb2.ModelInferRequest(model_name="m", id="7")
    ours.parameters["sequence_id"].int64_param = 3
    tensor = ours.inputs.add(name="IN", datatype="FP32", shape=[2])
    tensor.contents.fp32_contents.extend([1.0, 2.0])
    ours.raw_input_contents.append(b"\x00\x01")
    theirs = triton_service.ModelInferRequest.FromString(ours.SerializeToString())
    assert theirs.parameters["sequence_id"].int64_param == 3
    assert list(theirs.inputs[0].contents.fp32_contents) == [1.0, 2.0]
    assert grpc_service_pb2.ModelInferRequest.FromString(theirs.SerializeToString()) == ours


@pytest.mark.parametrize(
    "imports",
    [
        ["import tritonclient.grpc", "from naiad.protocol import grpc_service_pb2, health_pb2"],
        ["from naiad.protocol import grpc_service_pb2, health_pb2", "import tritonclient.grpc"],
        ["from naiad.grpc import GrpcFrontend", "import tritonclient.grpc.aio"],
    ],
    ids=["triton-first", "naiad-first", "frontend-then-aio-client"],
)
def test_coexists_with_tritonclient(imports: list[str]) -> None:
    code = "\n".join(
        [
            *imports,
            "from naiad.protocol import grpc_service_pb2 as n",
            "from tritonclient.grpc import service_pb2 as t",
            "assert n.ModelInferRequest(id='a').id == t.ModelInferRequest(id='a').id",
        ]
    )
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
