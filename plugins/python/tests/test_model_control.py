"""Model control from python models (``pb_utils.is_model_ready``, ``load_model``, ``unload_model``) in a real server.

Every test runs twice: with the calling models in the server process and in worker processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ThreadedServer, serve_in_thread

from .models import ADD_SUB, MODEL_CONTROLLER, READY_PROBE, isolated, write_model

EXPLICIT_ONLY = "explicit model load / unload is not allowed if polling is enabled"
# ADD_SUB's config in Triton's JSON (the load API's format), with two instances instead of one.
TARGET_CONFIG = {
    "name": "target",
    "backend": "python",
    "max_batch_size": 0,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "instance_group": [{"kind": "KIND_CPU", "count": 2}],
}


@pytest.fixture(scope="module", params=["thread", "process"])
def repo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("models")
    write_model(path, "probe", isolated(READY_PROBE, request.param))
    write_model(path, "controller", isolated(MODEL_CONTROLLER, request.param))
    write_model(path, "target", ADD_SUB)
    return path


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[ThreadedServer]:
    with serve_in_thread([repo], model_control_mode="explicit", load_models=("probe", "controller")) as running:
        yield running


def _strings(**values: str) -> list[httpclient.InferInput]:
    inputs = []
    for name, value in values.items():
        tensor = httpclient.InferInput(name, [1], "BYTES")
        tensor.set_data_from_numpy(np.array([value.encode()], dtype=np.object_))
        inputs.append(tensor)
    return inputs


def _ready(client: httpclient.InferenceServerClient, name: str, version: str = "") -> bool:
    """What ``pb_utils.is_model_ready(name, version)`` answers inside the probe model."""
    return bool(client.infer("probe", _strings(NAME=name, VERSION=version)).as_numpy("READY")[0])


def _control(client: httpclient.InferenceServerClient, action: str, target: str = "target", config: str = "") -> str:
    """Have the controller model run ``action`` on ``target``; returns its TritonModelException text or ""."""
    result = client.infer("controller", _strings(ACTION=action, TARGET=target, CONFIG=config))
    return str(result.as_numpy("ERROR")[0].decode())


def test_is_model_ready_from_a_model(http: httpclient.InferenceServerClient) -> None:
    assert _ready(http, "probe")
    assert not _ready(http, "target")  # in the repository, not loaded
    assert not _ready(http, "missing")
    http.load_model("target")
    try:
        assert _ready(http, "target")
        assert _ready(http, "target", "1")
        assert _ready(http, "target", "-1")  # Triton's "latest"
        assert not _ready(http, "target", "2")
        with pytest.raises(InferenceServerException, match="Failed to convert model version 'v1' to an integer"):
            _ready(http, "target", "v1")
    finally:
        http.unload_model("target")
    assert not _ready(http, "target")


def test_a_model_loads_and_unloads_another(http: httpclient.InferenceServerClient) -> None:
    assert _control(http, "load") == ""
    assert http.is_model_ready("target")
    assert _control(http, "unload") == ""
    assert not http.is_model_ready("target")

    assert _control(http, "load", config=json.dumps(TARGET_CONFIG)) == ""
    try:
        assert http.is_model_ready("target")
        assert http.get_model_config("target")["instance_group"][0]["count"] == 2
    finally:
        assert _control(http, "unload") == ""


def test_model_control_errors_carry_the_servers_message(http: httpclient.InferenceServerClient) -> None:
    assert _control(http, "load", "missing") == "failed to load 'missing', failed to poll from model repository"
    assert _control(http, "load", config="{not json").startswith("model config is not valid JSON: ")
    assert _control(http, "load_files") == (
        "pb_utils.load_model(): the 'files' argument (model files sent with the load) is not supported by "
        "naiad; put the files in the model repository and load the model by name"
    )
    assert _control(http, "unload_dependents") == (
        "pb_utils.unload_model(): unload_dependents=True is not supported by naiad; unload the models "
        "'target' depends on by name"
    )
    assert not http.is_model_ready("target")


def test_load_and_unload_need_explicit_model_control(repo: Path) -> None:
    with serve_in_thread([repo]) as default_mode:
        client = httpclient.InferenceServerClient(default_mode.http_url)
        try:
            assert _control(client, "load") == EXPLICIT_ONLY
            assert _control(client, "unload") == EXPLICIT_ONLY
            assert client.is_model_ready("target")
            assert _ready(client, "target")
        finally:
            client.close()
