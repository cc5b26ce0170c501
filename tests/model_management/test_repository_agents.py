"""Triton's ``checksum`` repository agent: a model loads only when its files have the hashes its config
gives (Triton's L0_repoagent_checksum)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .helpers import identity_config, infer

PAYLOAD = b"the model's weights"


def checksum_config(key: str, value: str) -> str:
    parameter = f'parameters {{ key: "{key}" value: "{value}" }}'
    agents = f'model_repository_agents {{ agents [ {{ name: "checksum", {parameter} }} ] }}'
    return identity_config(extra=agents)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("agents") / "models")
    digest = hashlib.md5(PAYLOAD, usedforsecurity=False).hexdigest()
    files = {"1/weights.bin": PAYLOAD}
    builder.add_model("checked", checksum_config("MD5:1/weights.bin", digest), files)
    builder.add_model("tampered", checksum_config("MD5:1/weights.bin", "invalid_checksum"), files)
    builder.add_model("missing", checksum_config("MD5:1/nothing.bin", digest), files)
    builder.add_model("sha", checksum_config("SHA256:1/weights.bin", digest), files)
    return builder.root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[ServerProcess]:
    process = start_server([repository], "--strict-readiness=false", "--model-control-mode=explicit", "--load-model=*")
    yield process
    process.stop()


def test_a_model_whose_files_match_loads_and_serves(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert infer(client, "checked", [1.0, 2.0]).tolist() == [1.0, 2.0]
    client.close()


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (
            "tampered",
            "model 'tampered': Mismatched MD5 hash for file 1/weights.bin, expect: invalid_checksum, got: "
            + hashlib.md5(PAYLOAD, usedforsecurity=False).hexdigest(),
        ),
        ("missing", "model 'missing': failed to open text file for read 1/nothing.bin: No such file or directory"),
        ("sha", "model 'sha': Unsupported checksum algorithm: SHA256"),
    ],
)
def test_a_model_whose_check_fails_does_not_load(server: ServerProcess, model: str, reason: str) -> None:
    assert f"'{model}': " + reason.split(": ", 1)[1] in server.logs()  # the line Triton's QA looks for
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready(model)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model(model)
    assert caught.value.message() == f"failed to load '{model}', failed to poll from model repository"
    client.close()
