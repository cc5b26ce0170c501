"""One model failing to load never stops the others; its error is reported where Triton does."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

IDENTITY = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        outputs = [pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy()) for r in requests]
        return [pb_utils.InferenceResponse([output]) for output in outputs]
"""

RAISES_IN_INITIALIZE = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file is corrupt")

    def execute(self, requests):
        return []
"""

CONFIG = """
backend: "{backend}"
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""


@pytest.fixture
def mixed_server(model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]) -> ServerProcess:
    model_repository.add_python_model("healthy", IDENTITY, CONFIG.format(backend="python"))
    model_repository.add_python_model("broken_init", RAISES_IN_INITIALIZE, CONFIG.format(backend="python"))
    model_repository.add_model("broken_config", 'backend: "python"\ninput [ { name: "X" dtype: TYPE_FP32 } ]')
    model_repository.add_model("missing_backend", CONFIG.format(backend="nonexistent"), {"1/model.bin": b"\0"})
    model_repository.add_model("misspelled_backend", CONFIG.format(backend="pyhton"), {"1/model.py": IDENTITY})
    return naiad_server(model_repository.root)


def test_other_models_serve_while_one_fails(mixed_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(mixed_server.http_url)
    tensor = httpclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1.5, 2.5], dtype=np.float32))
    np.testing.assert_array_equal(client.infer("healthy", [tensor]).as_numpy("OUTPUT0"), [1.5, 2.5])
    assert client.is_server_live()
    assert not client.is_server_ready()  # strict readiness: one model is not ready
    assert client.is_model_ready("healthy")
    assert not client.is_model_ready("broken_init")


def test_failed_model_reports_its_error(mixed_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(mixed_server.http_url)
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata("broken_init")
    assert caught.value.status() == "404"
    assert caught.value.message() == "Request for unknown model: 'broken_init' has no available versions"
    logs = mixed_server.logs()
    assert "model 'broken_init' version 1 failed to load" in logs
    assert "weights file is corrupt" in logs
    assert "model 'broken_config'" in logs
    assert "dtype" in logs
    assert "no installed distribution provides backend 'nonexistent'" in logs
    assert "pip install naiad-" not in logs  # never a package name nobody checked


def test_misspelled_backend_is_reported_with_close_names_and_installed_ones(mixed_server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(mixed_server.http_url)
    reasons = {entry["name"]: entry.get("reason", "") for entry in client.get_model_repository_index()}
    reason = reasons["misspelled_backend"]
    assert "no installed distribution provides backend 'pyhton'" in reason
    assert "Did you mean 'python'" in reason
    installed = reason.split("Installed backends: ", 1)[1].split(".", 1)[0].split(", ")
    assert {"identity", "python"} <= set(installed)
    assert "plugins/<name> in its source tree" in reason
    assert "comes from its author" in reason
