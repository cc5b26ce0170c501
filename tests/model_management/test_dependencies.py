"""Models that need others (an ensemble's steps): in explicit mode a load brings in what the model
needs; an unload takes the models that need it along, and with ``unload_dependents`` also the
models it needs that nothing else still uses and that no load named (Triton 2.51's behaviour)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess

from .helpers import ensemble_config, identity_config, identity_files, infer


def _add_models(model_repository: ModelRepositoryBuilder) -> None:
    model_repository.add_model("step", identity_config(), identity_files(1))
    model_repository.add_model("pipeline", ensemble_config("step"), identity_files(1))
    model_repository.add_model("bystander", identity_config(), identity_files(1))


@pytest.fixture
def server(model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]) -> ServerProcess:
    _add_models(model_repository)
    return naiad_server(model_repository.root, args=("--model-control-mode=explicit", "--load-model=bystander"))


def _client(server: ServerProcess, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url)
    return grpcclient.InferenceServerClient(server.grpc_url)


def _ready(client: Any) -> set[str]:
    return {name for name in ("step", "pipeline", "bystander") if client.is_model_ready(name)}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_brings_in_what_the_model_needs_and_unload_takes_dependents(server: ServerProcess, protocol: str) -> None:
    client = _client(server, protocol)
    client.load_model("pipeline")
    assert _ready(client) == {"step", "pipeline", "bystander"}
    assert infer(client, "pipeline", [1.0, 2.0]).tolist() == [1.0, 2.0]

    client.unload_model("step")  # the ensemble cannot run without it
    assert _ready(client) == {"bystander"}

    client.load_model("pipeline")
    client.unload_model("pipeline")  # without unload_dependents the step stays
    assert _ready(client) == {"step", "bystander"}

    client.load_model("pipeline")
    client.unload_model("pipeline", unload_dependents=True)
    assert _ready(client) == {"bystander"}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unload_dependents_keeps_a_model_that_a_load_named(server: ServerProcess, protocol: str) -> None:
    client = _client(server, protocol)
    client.load_model("step")  # named by a load: Triton's "explicitly loaded"
    client.load_model("pipeline")
    client.unload_model("pipeline", unload_dependents=True)
    assert _ready(client) == {"step", "bystander"}

    client.unload_model("step")
    client.load_model("pipeline")  # the step serves as its need only
    client.load_model("step")  # already serving: it stays a need, as in Triton
    client.unload_model("pipeline", unload_dependents=True)
    assert _ready(client) == {"bystander"}


def test_models_named_at_startup_are_kept_by_unload_dependents(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    _add_models(model_repository)
    for named, kept in (("--load-model=step", True), ("--load-model=bystander", False)):
        server = naiad_server(
            model_repository.root, args=("--model-control-mode=explicit", "--load-model=pipeline", named)
        )
        client = httpclient.InferenceServerClient(server.http_url)
        client.unload_model("pipeline", unload_dependents=True)
        assert client.is_model_ready("step") is kept
        server.stop()


def test_startup_with_load_model_loads_what_it_needs(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_model("step", identity_config(), identity_files(1))
    model_repository.add_model("pipeline", ensemble_config("step"), identity_files(1))
    server = naiad_server(model_repository.root, args=("--model-control-mode=explicit", "--load-model=pipeline"))
    client = httpclient.InferenceServerClient(server.http_url)
    assert infer(client, "pipeline", [3.0]).tolist() == [3.0]
    assert client.is_model_ready("step")
