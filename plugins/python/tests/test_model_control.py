"""Model control from python models (``pb_utils.is_model_ready``, ``load_model``, ``unload_model``) in a real server.

Every test runs twice: with the calling models in the server process and in worker processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ThreadedServer, python_identity, serve_in_thread

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


# An ensemble whose one step is `target`: unloading it with its dependents unloads `target` too.
PIPELINE_CONFIG = """
name: "pipeline"
platform: "ensemble"
max_batch_size: 0
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "B" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [ {
    model_name: "target"
    model_version: -1
    input_map { key: "INPUT0" value: "A" }
    input_map { key: "INPUT1" value: "B" }
    output_map { key: "OUTPUT0" value: "SUM" }
  } ]
}
"""


def _failed(action: str, message: str, caller: str = "controller_0") -> str:
    """A failed model-control call as the model (its instance ``caller``) sees it: the server's message
    in Triton's wrapping."""
    return f"Failed to {action}: Failed to process the request for model '{caller}', message: {message}"


@pytest.fixture(scope="module", params=["thread", "process"])
def repo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("models")
    write_model(path, "probe", isolated(READY_PROBE, request.param))
    write_model(path, "controller", isolated(MODEL_CONTROLLER, request.param))
    write_model(path, "target", ADD_SUB)
    (path / "pipeline" / "1").mkdir(parents=True)
    (path / "pipeline" / "config.pbtxt").write_text(PIPELINE_CONFIG)
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
        assert _ready(http, "target", " 1.0")  # read as C++'s std::stol reads it, as in Triton
        assert not _ready(http, "target", "2")
        assert not _ready(http, "target", "0")
        with pytest.raises(InferenceServerException) as refused:
            _ready(http, "target", "v1")
        assert _failed(
            "check model readiness",
            "failed to get model version from specified version string 'v1' (details: stol), version should be "
            "an integral value > 0",
            caller="probe_0",
        ) in str(refused.value)
        with pytest.raises(InferenceServerException, match="version string '-1', version should be an integral"):
            _ready(http, "target", "-1")
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


def test_model_control_errors_carry_the_servers_message_in_tritons_wrapping(
    http: httpclient.InferenceServerClient,
) -> None:
    poll_failure = "failed to load '{}', failed to poll from model repository"
    assert _control(http, "load", "missing") == _failed("load model", poll_failure.format("missing"))
    assert _control(http, "load", config="{not json") == _failed("load model", poll_failure.format("target"))
    no_config = json.dumps({"config": None, "files": {"file:1/model.py": python_identity("OUT")}})
    assert _control(http, "load_files", "fresh", no_config) == _failed("load model", poll_failure.format("fresh"))
    assert not http.is_model_ready("target")


def test_a_model_loads_another_from_files_it_sends(http: httpclient.InferenceServerClient) -> None:
    config = {**TARGET_CONFIG, "name": "fresh", "instance_group": [{"kind": "KIND_CPU", "count": 1}]}
    sent = {"config": config, "files": {"file:1/model.py": python_identity("OUTPUT0")}}
    assert _control(http, "load_files", "fresh", json.dumps(sent)) == ""
    try:
        inputs = [httpclient.InferInput(name, [4], "FP32") for name in ("INPUT0", "INPUT1")]
        for tensor, values in zip(inputs, ([1, 2, 3, 4], [0, 0, 0, 0]), strict=True):
            tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
        result = http.infer("fresh", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT0")])
        assert result.as_numpy("OUTPUT0").tolist() == [1, 2, 3, 4]
    finally:
        assert _control(http, "unload", "fresh") == ""


def test_unload_dependents_takes_the_models_an_ensemble_needs(http: httpclient.InferenceServerClient) -> None:
    http.load_model("pipeline")  # loads `target`, its step, with it
    assert http.is_model_ready("target")
    assert _control(http, "unload", "pipeline") == ""
    assert http.is_model_ready("target")  # without dependents, the step stays
    http.load_model("pipeline")
    assert _control(http, "unload_dependents", "pipeline") == ""
    assert not http.is_model_ready("pipeline")
    assert not http.is_model_ready("target")


def test_names_and_configs_may_be_bytes_as_in_triton(http: httpclient.InferenceServerClient) -> None:
    assert _control(http, "load_named_by_bytes", config=json.dumps(TARGET_CONFIG)) == ""
    try:
        assert http.get_model_config("target")["instance_group"][0]["count"] == 2
    finally:
        assert _control(http, "unload") == ""


def test_a_model_that_unloads_itself_is_answered_at_once(http: httpclient.InferenceServerClient) -> None:
    began = time.monotonic()
    assert _control(http, "unload", "controller") == ""
    assert time.monotonic() - began < 10  # not the unload timeout: the unload waits for this very request
    deadline = time.monotonic() + 30
    while http.is_model_ready("controller") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not http.is_model_ready("controller")
    http.load_model("controller")


def test_load_and_unload_need_explicit_model_control(repo: Path) -> None:
    with serve_in_thread([repo]) as default_mode:
        client = httpclient.InferenceServerClient(default_mode.http_url)
        try:
            assert _control(client, "load") == _failed("load model", EXPLICIT_ONLY)
            assert _control(client, "unload") == _failed("unload model", EXPLICIT_ONLY)
            assert client.is_model_ready("target")
            assert _ready(client, "target")
        finally:
            client.close()
