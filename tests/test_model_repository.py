"""The model-repository extension: index, explicit load, unload and reload over HTTP and gRPC."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf.json_format import MessageToJson
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

DOUBLER = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * 2)]) for r in requests]
"""

BROKEN = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file is corrupt")

    def execute(self, requests):
        return []
"""

CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


@pytest.fixture
def repository(model_repository: ModelRepositoryBuilder) -> ModelRepositoryBuilder:
    model_repository.add_python_model("doubler", DOUBLER, CONFIG)
    model_repository.add_python_model("spare", DOUBLER, CONFIG)
    model_repository.add_python_model("broken", BROKEN, CONFIG)
    return model_repository


def _double(client: Any, module: Any) -> np.ndarray:
    tensor = module.InferInput("IN", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1.5, 2.0], dtype=np.float32))
    return client.infer("doubler", [tensor]).as_numpy("OUT")


def test_explicit_mode_loads_only_named_models_and_indexes_the_rest(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = naiad_server(repository.root, args=("--model-control-mode=explicit", "--load-model=doubler"))
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.get_model_repository_index() == [
        {"name": "broken"},
        {"name": "doubler", "version": "1", "state": "READY"},
        {"name": "spare"},
    ]
    assert not client.is_model_ready("spare")
    client.load_model("spare")
    assert client.is_model_ready("spare")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unload_and_reload(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], protocol: str
) -> None:
    server = naiad_server(repository.root, args=("--model-control-mode=explicit", "--load-model=doubler"))
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    np.testing.assert_array_equal(_double(client, module), [3.0, 4.0])
    client.unload_model("doubler")
    assert not client.is_model_ready("doubler")
    with pytest.raises(InferenceServerException, match="has no available versions"):
        _double(client, module)
    index = client.get_model_repository_index()
    entries = (
        index
        if protocol == "http"
        else [{"name": m.name, "version": m.version, "state": m.state, "reason": m.reason} for m in index.models]
    )
    doubler = next(entry for entry in entries if entry["name"] == "doubler")
    assert (doubler["state"], doubler["reason"]) == ("UNAVAILABLE", "unloaded")
    client.load_model("doubler")
    np.testing.assert_array_equal(_double(client, module), [3.0, 4.0])


def test_load_errors_match_triton(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = naiad_server(repository.root, args=("--model-control-mode=explicit",))
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("broken")
    assert caught.value.status() == "400"
    assert caught.value.message().startswith("load failed for model 'broken': version 1 is at UNAVAILABLE state: ")
    assert "weights file is corrupt" in caught.value.message()
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("nowhere")
    assert (caught.value.status(), caught.value.message()) == (
        "500",
        "failed to load 'nowhere', failed to poll from model repository",
    )
    client.unload_model("nowhere")  # unloading an unknown model succeeds, as in Triton


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_in_two_repositories_is_listed_unavailable_and_refused_as_in_triton(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path, protocol: str
) -> None:
    other = ModelRepositoryBuilder(tmp_path / "other")
    other.add_python_model("doubler", DOUBLER, CONFIG)
    server = naiad_server(repository.root, other.root, args=("--model-control-mode=explicit",))
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("doubler")
    assert caught.value.message() == "failed to load 'doubler', failed to poll from model repository"
    index = client.get_model_repository_index()
    entries = index if protocol == "http" else json.loads(MessageToJson(index))["models"]
    (entry,) = [e for e in entries if e["name"] == "doubler"]
    assert "version" not in entry
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] == "model appears in two or more repositories"  # Triton's words; where: in the log
    places = f"{repository.root / 'doubler'}, {other.root / 'doubler'}"
    assert f"model appears in two or more repositories ({places}); keep one" in server.logs()
    assert {e["name"]: e.get("state") for e in entries}["spare"] is None  # never loaded: name only


def test_a_policy_that_selects_no_version_fails_the_load_in_tritons_words(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    folder = model_repository.add_model("v5", CONFIG + "version_policy: { specific { versions: [ 5 ] } }")
    (folder / "1").mkdir()
    (folder / "1" / "model.py").write_text(DOUBLER)
    server = naiad_server(model_repository.root, args=("--model-control-mode=explicit",))
    expected = (
        "load failed for model 'v5': at least one version must be available under the version policy of model 'v5'\n"
    )
    with pytest.raises(InferenceServerException) as caught:
        httpclient.InferenceServerClient(server.http_url).load_model("v5")
    assert (caught.value.status(), caught.value.message()) == ("400", expected)
    with pytest.raises(InferenceServerException) as caught:
        grpcclient.InferenceServerClient(server.grpc_url).load_model("v5")
    assert (caught.value.status(), caught.value.message()) == ("StatusCode.INVALID_ARGUMENT", expected)


def test_a_model_loads_all_its_versions_or_none(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """As in Triton: when one version fails, the versions that loaded are unloaded, and the error
    names only the version that failed."""
    folder = model_repository.add_model("mixed", CONFIG + "version_policy: { all { } }")
    (folder / "1").mkdir()
    (folder / "1" / "model.py").write_text(DOUBLER)
    (folder / "2").mkdir()
    (folder / "2" / "model.py").write_text(BROKEN)
    server = naiad_server(model_repository.root, args=("--model-control-mode=explicit",))
    client = httpclient.InferenceServerClient(server.http_url)
    for _ in range(2):
        with pytest.raises(InferenceServerException) as caught:
            client.load_model("mixed")
        message = caught.value.message()
        assert message.startswith("load failed for model 'mixed': version 2 is at UNAVAILABLE state: ")
        assert "version 1" not in message
        assert not client.is_model_ready("mixed", "1")
        index = {entry["version"]: entry for entry in client.get_model_repository_index() if entry["name"] == "mixed"}
        assert (index["1"]["state"], index["1"]["reason"]) == ("UNAVAILABLE", "unloaded")
        assert index["2"]["state"] == "UNAVAILABLE"
        assert "weights file is corrupt" in index["2"]["reason"]
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata("mixed")
    assert (caught.value.status(), caught.value.message()) == (
        "404",
        "Request for unknown model: 'mixed' has no available versions",
    )
    assert "version 1, which loaded, is unloaded" in server.logs()


def test_a_load_failing_on_several_versions_names_them_newest_first(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """Triton's text: each failed version ends in ";", newest first, one newline at the end."""
    folder = model_repository.add_model("both", CONFIG + "version_policy: { all { } }")
    for version in ("1", "2"):
        (folder / version).mkdir()
        (folder / version / "model.py").write_text(BROKEN)
    server = naiad_server(model_repository.root, args=("--model-control-mode=explicit",))
    for client in (
        httpclient.InferenceServerClient(server.http_url),
        grpcclient.InferenceServerClient(server.grpc_url),
    ):
        with pytest.raises(InferenceServerException) as caught:
            client.load_model("both")
        reasons = {
            entry["version"]: entry["reason"]
            for entry in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
            if entry["name"] == "both"
        }
        assert "weights file is corrupt" in reasons["1"]
        assert caught.value.message() == (
            f"load failed for model 'both': version 2 is at UNAVAILABLE state: {reasons['2']};"
            f"version 1 is at UNAVAILABLE state: {reasons['1']};\n"
        )


def test_a_reload_that_drops_versions_succeeds(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """A version the new config or folder no longer selects unloads; the load itself succeeds, as in
    Triton, and so do later loads (the dropped version stays listed as unloaded)."""
    folder = model_repository.add_model("versions", CONFIG + "version_policy: { all { } }")
    for version in ("1", "2", "3"):
        (folder / version).mkdir()
        (folder / version / "model.py").write_text(DOUBLER)
    server = naiad_server(model_repository.root, args=("--model-control-mode=explicit", "--load-model=versions"))
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)

    def states() -> dict[str, tuple[str, str]]:
        return {
            e["version"]: (e["state"], e.get("reason", ""))
            for e in http.get_model_repository_index()
            if e["name"] == "versions"
        }

    (folder / "config.pbtxt").write_text(CONFIG + "version_policy: { specific { versions: [ 1, 2 ] } }")
    http.load_model("versions")
    assert states() == {"1": ("READY", ""), "2": ("READY", ""), "3": ("UNAVAILABLE", "unloaded")}
    (folder / "2" / "model.py").unlink()
    (folder / "2").rmdir()
    grpc.load_model("versions")
    assert states() == {"1": ("READY", ""), "2": ("UNAVAILABLE", "unloaded"), "3": ("UNAVAILABLE", "unloaded")}
    override = {"backend": "python", "version_policy": {"specific": {"versions": [3]}}}
    http.load_model("versions", config=json.dumps(override))
    assert states()["3"] == ("READY", "")
    grpc.load_model("versions")  # back to config.pbtxt: version 1 only
    assert states() == {"1": ("READY", ""), "2": ("UNAVAILABLE", "unloaded"), "3": ("UNAVAILABLE", "unloaded")}
    assert http.is_model_ready("versions", "1")


def test_load_with_a_config_override(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = naiad_server(repository.root, args=("--model-control-mode=explicit",))
    client = httpclient.InferenceServerClient(server.http_url)
    override = {
        "backend": "python",
        "max_batch_size": 4,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}],
    }
    client.load_model("spare", config=json.dumps(override))
    assert client.get_model_config("spare")["max_batch_size"] == 4


def test_load_and_unload_are_refused_without_explicit_mode(
    repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    server = naiad_server(repository.root)
    client = httpclient.InferenceServerClient(server.http_url)
    assert {"name": "doubler", "version": "1", "state": "READY"} in client.get_model_repository_index()
    for call in (client.load_model, client.unload_model):
        with pytest.raises(InferenceServerException) as caught:
            call("doubler")
        assert (caught.value.status(), caught.value.message()) == (
            "503",
            "explicit model load / unload is not allowed if polling is enabled",
        )
