"""--model-control-mode=poll: models and versions added, changed and removed are picked up; a folder
still being copied is not loaded half-written; a failed reload keeps the old versions serving."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, python_identity, start_server

from .helpers import (
    POLL_FLAG,
    POLL_SECS,
    UNKNOWN_MODEL,
    ensemble_config,
    identity_config,
    identity_files,
    index,
    infer,
    wait_until,
)


@pytest.fixture(scope="module")
def model_repository(tmp_path_factory: pytest.TempPathFactory) -> ModelRepositoryBuilder:
    return ModelRepositoryBuilder(tmp_path_factory.mktemp("poll") / "models")


@pytest.fixture(scope="module")
def polled(model_repository: ModelRepositoryBuilder) -> Iterator[ServerProcess]:
    """One polling server for the module; each test works on models of its own."""
    model_repository.add_model("steady", identity_config(), identity_files(1))
    server = start_server([model_repository.root], "--model-control-mode=poll", POLL_FLAG)
    yield server
    server.stop()


def test_added_changed_and_removed_models(model_repository: ModelRepositoryBuilder, polled: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(polled.http_url)
    model_repository.add_model("fresh", identity_config(), identity_files(1))
    wait_until(lambda: client.is_model_ready("fresh"), what="the added model to load")
    assert infer(client, "fresh", [1.0, 2.0]).tolist() == [1.0, 2.0]

    model_repository.add_model("fresh", identity_config(max_batch_size=4), identity_files(1))
    wait_until(lambda: client.get_model_config("fresh")["max_batch_size"] == 4, what="the changed config to load")

    shutil.rmtree(model_repository.root / "fresh")
    wait_until(lambda: not client.is_model_ready("fresh"), what="the unload")
    assert "fresh" not in {e["name"] for e in client.get_model_repository_index()}
    with pytest.raises(InferenceServerException, match=UNKNOWN_MODEL):
        infer(client, "fresh", [1.0])
    # as in Triton, the server remembers the model it unloaded
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata("fresh")
    assert (caught.value.status(), caught.value.message()) == (
        "404",
        "Request for unknown model: 'fresh' has no available versions",
    )
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata("fresh", "1")
    assert (caught.value.status(), caught.value.message()) == (
        "503",
        "Request for unknown model: 'fresh' version 1 is not at ready state",
    )
    assert client.is_model_ready("steady")


def test_added_and_removed_versions(model_repository: ModelRepositoryBuilder, polled: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(polled.http_url)
    model_repository.add_model("versioned", identity_config(extra="version_policy: { all: {} }"), identity_files(1))
    wait_until(lambda: client.is_model_ready("versioned", "1"), what="version 1 to load")
    model_repository.add_model("versioned", None, identity_files(2))
    wait_until(lambda: client.is_model_ready("versioned", "2"), what="the added version to load")
    assert client.is_model_ready("versioned", "1")

    shutil.rmtree(model_repository.root / "versioned" / "2")
    wait_until(lambda: index(client).get(("versioned", "2")) == "UNAVAILABLE", what="version 2 to unload, listed")
    assert not client.is_model_ready("versioned", "2")
    assert infer(client, "versioned", [3.0]).tolist() == [3.0]  # version 1 serves on


def test_a_folder_being_copied_loads_once_complete(
    model_repository: ModelRepositoryBuilder, polled: ServerProcess
) -> None:
    client = httpclient.InferenceServerClient(polled.http_url)
    model_dir = model_repository.root / "copied"
    model_dir.mkdir()
    (model_dir / "config.pbtxt").write_text('backend: "identity"\ninput [ { name: "INPUT0" data_type: TY')
    time.sleep(POLL_SECS * 5)
    assert not client.is_model_ready("copied")
    model_repository.add_model("copied", identity_config(), identity_files(1))
    wait_until(lambda: client.is_model_ready("copied"), what="the completed folder to load")
    assert infer(client, "copied", [5.0]).tolist() == [5.0]


def test_a_failed_reload_keeps_the_serving_version(
    model_repository: ModelRepositoryBuilder, polled: ServerProcess
) -> None:
    client = httpclient.InferenceServerClient(polled.http_url)
    (model_repository.root / "steady" / "config.pbtxt").write_text(identity_config() + "\nmax_batch_size: {{{")
    time.sleep(POLL_SECS * 5)
    assert infer(client, "steady", [7.0]).tolist() == [7.0]
    model_repository.add_model("steady", identity_config(max_batch_size=2))
    wait_until(lambda: client.get_model_config("steady")["max_batch_size"] == 2, what="the fixed config to load")


def test_a_new_version_that_fails_is_listed_with_its_reason_while_the_old_one_serves(
    model_repository: ModelRepositoryBuilder, polled: ServerProcess
) -> None:
    client = httpclient.InferenceServerClient(polled.http_url)
    config = identity_config().replace('backend: "identity"', 'backend: "python"')
    model_repository.add_model("upgraded", config, {"1/model.py": python_identity("OUTPUT0")})
    wait_until(lambda: client.is_model_ready("upgraded"), what="version 1 to load")
    model_repository.add_model("upgraded", None, {"2/model.py": "raise RuntimeError('no weights for version 2')"})
    wait_until(lambda: ("upgraded", "2") in index(client), what="the failed version to be listed")
    (failed,) = [e for e in client.get_model_repository_index() if e["name"] == "upgraded" and e["version"] == "2"]
    assert failed["state"] == "UNAVAILABLE"
    assert "RuntimeError: no weights for version 2" in failed["reason"]
    assert index(client)[("upgraded", "1")] == "READY"
    assert infer(client, "upgraded", [4.0]).tolist() == [4.0]
    assert not client.is_server_ready()  # as in Triton: a version the repository holds does not serve
    shutil.rmtree(model_repository.root / "upgraded" / "2")
    wait_until(lambda: ("upgraded", "2") not in index(client), what="the removed version to leave the index")
    assert client.is_server_ready()


def test_a_removed_step_takes_its_ensemble_along_until_it_is_back(
    model_repository: ModelRepositoryBuilder, polled: ServerProcess, tmp_path: Path
) -> None:
    """As in Triton's poll mode: the ensemble unloads (listed as unloaded) and loads again with its step."""
    client = httpclient.InferenceServerClient(polled.http_url)
    model_repository.add_model("polled_step", identity_config(), identity_files(1))
    model_repository.add_model("polled_pipeline", ensemble_config("polled_step"), identity_files(1))
    wait_until(lambda: client.is_model_ready("polled_pipeline"), what="the ensemble to load")

    shutil.move(model_repository.root / "polled_step", tmp_path / "polled_step")
    wait_until(lambda: not client.is_model_ready("polled_pipeline"), what="the ensemble to unload with its step")
    entries = {e["name"]: e for e in client.get_model_repository_index() if e["name"].startswith("polled_")}
    assert entries == {
        "polled_pipeline": {"name": "polled_pipeline", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    }
    with pytest.raises(InferenceServerException, match="'polled_pipeline' has no available versions"):
        infer(client, "polled_pipeline", [1.0])

    shutil.move(tmp_path / "polled_step", model_repository.root / "polled_step")
    wait_until(lambda: client.is_model_ready("polled_pipeline"), what="the ensemble to load again with its step")
    assert infer(client, "polled_pipeline", [4.0]).tolist() == [4.0]


def test_load_and_unload_are_refused(polled: ServerProcess) -> None:
    message = "explicit model load / unload is not allowed if polling is enabled"
    http = httpclient.InferenceServerClient(polled.http_url)
    grpc = grpcclient.InferenceServerClient(polled.grpc_url)
    for call in (http.load_model, http.unload_model):
        with pytest.raises(InferenceServerException) as caught:
            call("steady")
        assert (caught.value.status(), caught.value.message()) == ("503", message)
    for call in (grpc.load_model, grpc.unload_model):
        with pytest.raises(InferenceServerException) as caught:
            call("steady")
        assert (caught.value.status(), caught.value.message()) == ("StatusCode.UNAVAILABLE", message)
