"""Version folders and policies, auto-complete and strict configs, served end to end."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

VERSIONED = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.version = int(args["model_version"])

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("VERSION", np.array([self.version], dtype=np.int32))])
            for _ in requests
        ]
"""

VERSIONED_CONFIG = """
backend: "python"
{policy}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "VERSION" data_type: TYPE_INT32 dims: [ 1 ] }} ]
"""

AUTO_COMPLETED = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        outputs = [pb_utils.Tensor("Y", r.inputs()[0].as_numpy() * 10) for r in requests]
        return [pb_utils.InferenceResponse([output]) for output in outputs]
"""


def _version_of(client: httpclient.InferenceServerClient, model: str, version: str = "") -> int:
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([0], dtype=np.int32))
    return int(client.infer(model, [tensor], model_version=version).as_numpy("VERSION")[0])


@pytest.fixture
def versioned_server(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> ServerProcess:
    policies = {
        "latest_default": "",
        "latest_two": "version_policy: { latest { num_versions: 2 } }",
        "all_versions": "version_policy: { all { } }",
        "specific": "version_policy: { specific { versions: [ 1, 3 ] } }",
    }
    for name, policy in policies.items():
        files = {f"{version}/model.py": VERSIONED for version in ("1", "2", "3", "04")}
        model_repository.add_model(name, VERSIONED_CONFIG.format(policy=policy), files)
    model_repository.add_model("zero", VERSIONED_CONFIG.format(policy=""), {"0/model.py": VERSIONED})
    return naiad_server(model_repository.root)


def test_version_policies(versioned_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(versioned_server.http_url)
    expected = {
        "latest_default": ["3"],
        "latest_two": ["2", "3"],
        "all_versions": ["1", "2", "3"],
        "specific": ["1", "3"],
        "zero": ["0"],
    }
    for model, versions in expected.items():
        assert client.get_model_metadata(model)["versions"] == versions, model
        assert _version_of(client, model) == int(versions[-1])
        for version in versions:
            assert _version_of(client, model, version) == int(version)


def test_leading_zero_folders_are_not_versions(versioned_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(versioned_server.http_url)
    with pytest.raises(InferenceServerException) as caught:
        _version_of(client, "all_versions", "4")
    assert caught.value.message() == "Request for unknown model: 'all_versions' version 4 is not found"
    assert "'04'" in versioned_server.logs()


def test_versions_outside_the_policy_are_not_served(versioned_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(versioned_server.http_url)
    with pytest.raises(InferenceServerException) as caught:
        _version_of(client, "latest_two", "1")
    assert caught.value.status() == "404"


def test_python_auto_complete_fills_a_missing_config(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_model("completed", None, {"1/model.py": AUTO_COMPLETED})
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("completed")
    assert config["backend"] == "python"
    assert config["max_batch_size"] == 4
    assert [tensor["name"] for tensor in config["input"]] == ["X"]
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    tensor = httpclient.InferInput("X", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.array([[1, 2]], dtype=np.float32))
    np.testing.assert_array_equal(client.infer("completed", [tensor]).as_numpy("Y"), [[10, 20]])


def test_strict_model_config_requires_a_config_file(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_model("completed", None, {"1/model.py": AUTO_COMPLETED})
    server = naiad_server(model_repository.root, args=("--strict-model-config=true",))
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready("completed")
    assert "is required when auto-complete is disabled" in server.logs()
