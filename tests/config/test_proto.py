"""naiad's model_config.proto against tritonclient's, and the generated modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc.model_config_pb2 as triton_pb2

from naiad.protocol import _pool, model_config_pb2

ROOT = Path(__file__).resolve().parents[2]


def _field(field: Any) -> dict[str, Any]:
    return {
        "name": field.name,
        "number": field.number,
        "type": field.type,
        "repeated": field.is_repeated,
        "required": field.is_required,
        "message": field.message_type.full_name if field.message_type else None,
        "enum": field.enum_type.full_name if field.enum_type else None,
        "oneof": field.containing_oneof.name if field.containing_oneof else None,
        "json_name": field.json_name,
        "presence": field.has_presence,
    }


def _enum(enum: Any) -> dict[str, Any]:
    return {"full_name": enum.full_name, "values": [(v.name, v.number) for v in enum.values]}


def _message(message: Any) -> dict[str, Any]:
    return {
        "full_name": message.full_name,
        "map_entry": message.GetOptions().map_entry,
        "fields": [_field(f) for f in message.fields],
        "oneofs": [(o.name, [f.name for f in o.fields]) for o in message.oneofs],
        "enums": [_enum(e) for e in message.enum_types],
        "nested": [_message(m) for m in message.nested_types],
    }


def _file(file: Any) -> dict[str, Any]:
    return {
        "name": file.name,
        "package": file.package,
        "dependencies": [d.name for d in file.dependencies],
        "enums": [_enum(e) for e in file.enum_types_by_name.values()],
        "messages": [_message(m) for m in file.message_types_by_name.values()],
    }


def test_descriptor_matches_tritonclient() -> None:
    ours, theirs = _file(model_config_pb2.DESCRIPTOR), _file(triton_pb2.DESCRIPTOR)
    assert len(ours["messages"]) == 21
    assert [m["full_name"] for m in ours["messages"]] == [m["full_name"] for m in theirs["messages"]]
    for mine, reference in zip(ours["messages"], theirs["messages"], strict=True):
        assert mine == reference, mine["full_name"]
    assert ours == theirs


def test_descriptor_lives_in_private_pool() -> None:
    assert model_config_pb2.DESCRIPTOR.pool is _pool.POOL
    assert triton_pb2.DESCRIPTOR.pool is not _pool.POOL
    assert model_config_pb2.ModelConfig.DESCRIPTOR is not triton_pb2.ModelConfig.DESCRIPTOR
    assert model_config_pb2.ModelConfig.__module__ == "naiad.protocol.model_config_pb2"


def test_wire_compatible_with_tritonclient() -> None:
    ours = model_config_pb2.ModelConfig(name="m", max_batch_size=4, backend="python")
    ours.input.add(name="IN", data_type=model_config_pb2.TYPE_FP32, dims=[-1, 3])
    ours.parameters["k"].string_value = "v"
    theirs = triton_pb2.ModelConfig.FromString(ours.SerializeToString())
    assert theirs.input[0].dims == [-1, 3]
    assert theirs.parameters["k"].string_value == "v"
    assert model_config_pb2.ModelConfig.FromString(theirs.SerializeToString()) == ours


@pytest.mark.parametrize(
    "imports",
    [
        ["import tritonclient.grpc.model_config_pb2", "from naiad.protocol import model_config_pb2"],
        ["from naiad.protocol import model_config_pb2", "import tritonclient.grpc.model_config_pb2"],
        ["from naiad.protocol import model_config_pb2", "import tritonclient.grpc"],
    ],
    ids=["triton-first", "naiad-first", "naiad-then-grpc-client"],
)
def test_coexists_with_tritonclient(imports: list[str]) -> None:
    code = "\n".join(
        [
            *imports,
            "from naiad.protocol import model_config_pb2 as n",
            "import tritonclient.grpc.model_config_pb2 as t",
            "assert n.ModelConfig(name='a').name == t.ModelConfig(name='a').name",
        ]
    )
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_naiad_alone_leaves_default_pool_empty() -> None:
    code = (
        "from google.protobuf import descriptor_pool\n"
        "from naiad.protocol import model_config_pb2\n"
        "try:\n"
        "    descriptor_pool.Default().FindMessageTypeByName('inference.ModelConfig')\n"
        "except KeyError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('inference.ModelConfig leaked into the default pool')\n"
    )
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_generated_files_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_protos.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
