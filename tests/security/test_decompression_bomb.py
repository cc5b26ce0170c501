"""Finding 2, decompression DoS: a gzip or deflate bomb inflates no further than ``--http-max-input-size``.

The probe's 1 MB bombs inflated to 1 GiB on the event loop (2.2 GB peak, every client frozen 7-9 s).
Now inflation stops at the limit with Triton's text, runs in a worker thread for all but tiny bodies,
and other clients keep being served meanwhile.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from collections.abc import Iterator

import pytest

from naiad.testing import ServerProcess, start_server

from .http_helpers import ADD_SUB_JSON, build_repository, request, rss_kib

LIMIT = 4 * 1024 * 1024
BOMB_SIZE = 128 * 1024 * 1024
INFER = "/v2/models/add_sub/infer"


@pytest.fixture(scope="module", params=["uvicorn", "hypercorn"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("bomb") / "models")
    process = start_server([repository], f"--http-server={request.param}", f"--http-max-input-size={LIMIT}")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """128 MiB of blanks after a valid JSON start, compressed both ways (about 128 KB each)."""
    payload = b'{"inputs":[' + b" " * BOMB_SIZE
    return {"gzip": gzip.compress(payload, 9), "deflate": zlib.compress(payload, 9)}


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_bomb_inflates_only_to_the_limit(server: ServerProcess, bombs: dict[str, bytes], encoding: str) -> None:
    before = rss_kib(server.process.pid)
    for _ in range(3):
        response = request(server.http_port, "POST", INFER, bombs[encoding], {"Content-Encoding": encoding})
        assert response.status == 400
        assert response.json() == {
            "error": f"Decompressed data size exceeds the maximum allowed value of {LIMIT} bytes. "
            "Use --http-max-input-size to increase the limit."
        }
    assert rss_kib(server.process.pid) - before < 4 * LIMIT // 1024


def test_other_clients_are_served_while_bombs_inflate(server: ServerProcess, bombs: dict[str, bytes]) -> None:
    statuses: list[int] = []

    def bomb() -> None:
        statuses.append(request(server.http_port, "POST", INFER, bombs["gzip"], {"Content-Encoding": "gzip"}).status)

    threads = [threading.Thread(target=bomb) for _ in range(8)]
    for thread in threads:
        thread.start()
    slowest = 0.0
    while any(thread.is_alive() for thread in threads):
        started = time.monotonic()
        assert request(server.http_port, "GET", "/v2/health/live").status == 200
        slowest = max(slowest, time.monotonic() - started)
    for thread in threads:
        thread.join()
    assert statuses == [400] * 8
    assert slowest < 1.0


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_requests_within_the_limit_are_served(server: ServerProcess, encoding: str) -> None:
    body = json.dumps(ADD_SUB_JSON).encode()
    compressed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    response = request(server.http_port, "POST", INFER, compressed, {"Content-Encoding": encoding})
    assert response.status == 200
    assert response.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_a_truncated_stream_is_a_plain_400(server: ServerProcess) -> None:
    compressed = gzip.compress(json.dumps(ADD_SUB_JSON).encode())
    response = request(server.http_port, "POST", INFER, compressed[:-12], {"Content-Encoding": "gzip"})
    assert response.status == 400
    assert response.json() == {"error": "failed to decompress the gzip request body: incomplete or truncated stream"}
