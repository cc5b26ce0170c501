"""Which requests the statistics count as failed, as Triton 2.51's python backend counts them.

A model that answers with an error response (returned from ``execute`` or sent by a decoupled
sender) has served its request: Triton counts it a success. A request fails when ``execute`` raised.
Every test runs with the models in the server process and in worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from naiad.testing import ThreadedServer, serve_in_thread

from .models import PythonModelSpec, isolated, write_model

CONFIG = """
name: "{name}"
backend: "python"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

MODELS = {
    "answers_error": PythonModelSpec(
        """
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("no answer for this")) for _ in requests]
        """,
        CONFIG,
    ),
    "sends_error": PythonModelSpec(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    sender = request.get_response_sender()
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("one bad step")))
                    answer = pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))
                    sender.send(
                        pb_utils.InferenceResponse([answer]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                    )
        """,
        CONFIG + "model_transaction_policy { decoupled: true }",
    ),
    "raises": PythonModelSpec(
        """
        class TritonPythonModel:
            def execute(self, requests):
                raise RuntimeError("model exploded")
        """,
        CONFIG,
    ),
}


@pytest.fixture(scope="module", params=["thread", "process"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    repo: Path = tmp_path_factory.mktemp("models")
    for name, spec in MODELS.items():
        write_model(repo, name, isolated(spec, request.param))
    with serve_in_thread([repo]) as running:
        yield running


def _counts(server: ThreadedServer, model: str) -> tuple[int, int, int]:
    """inference_count, success count, fail count."""
    stats = httpx.get(f"http://{server.http_url}/v2/models/{model}/stats", timeout=30).json()["model_stats"][0]
    inference = stats["inference_stats"]
    return stats["inference_count"], inference["success"]["count"], inference["fail"]["count"]


@pytest.mark.parametrize(
    ("model", "endpoint", "counts"),
    [
        ("answers_error", "infer", (1, 1, 0)),
        ("sends_error", "generate_stream", (1, 1, 0)),
        ("raises", "infer", (0, 0, 1)),
    ],
)
def test_an_error_the_model_answers_with_is_a_served_request(
    server: ThreadedServer, model: str, endpoint: str, counts: tuple[int, int, int]
) -> None:
    before = _counts(server, model)
    url = f"http://{server.http_url}/v2/models/{model}/{endpoint}"
    if endpoint == "infer":
        body = {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]}]}
        assert httpx.post(url, json=body, timeout=30).status_code >= 400
    else:
        assert "one bad step" in httpx.post(url, json={"IN": [1]}, timeout=30).text
    after = _counts(server, model)
    assert tuple(now - then for now, then in zip(after, before, strict=True)) == counts
