"""hypercorn serves the same API over cleartext HTTP/2 (h2c, prior knowledge)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from naiad.testing import ServerProcess, start_server


@pytest.fixture(scope="module")
def hypercorn_server(core_repository: Path) -> Iterator[ServerProcess]:
    server = start_server([core_repository], "--http-server=hypercorn")
    yield server
    server.stop()


def test_infer_over_http2(hypercorn_server: ServerProcess) -> None:
    body = {
        "inputs": [
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
        ]
    }
    with httpx.Client(http1=False, http2=True, base_url=f"http://{hypercorn_server.http_url}") as client:
        response = client.post("/v2/models/add_sub/infer", json=body)
        assert response.http_version == "HTTP/2"
        assert response.status_code == 200
        assert response.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
        assert client.get("/v2/health/ready").status_code == 200
