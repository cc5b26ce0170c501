"""Finding 2/3 (HTTP side), memory: an error path keeps no request data alive, and memory goes back to the OS.

The probe saw error paths keep large requests alive until a forced ``gc.collect()``, and glibc's
arenas keep hundreds of MB after large requests. Here a ``naiad serve`` process (so memory.py's
``mallopt`` applies) gets several large invalid requests of each kind (binary, JSON, compressed, too
large) and its resident size must come back near where it started, with no collection forced. A valid
large request costs one copy of its body and one of its response.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator

import numpy as np
import pytest

from naiad.testing import ServerProcess, start_server

from .http_helpers import build_repository, request, rss_kib

MIB = 1024 * 1024
SIZE = 48 * MIB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server([build_repository(tmp_path_factory.mktemp("memory") / "models")])
    yield process
    process.stop()


def _binary(size: int, *, extra_input: bool) -> tuple[bytes, dict[str, str]]:
    inputs = [{"name": "INPUT0", "shape": [size], "datatype": "UINT8", "parameters": {"binary_data_size": size}}]
    if extra_input:  # refused by validation, after the whole body was read
        inputs.append({"name": "NOPE", "shape": [0], "datatype": "UINT8", "parameters": {"binary_data_size": 0}})
    header = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    return header + np.full(size, 7, dtype=np.uint8).tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def _bad_json(count: int) -> bytes:
    data = json.dumps([1.5] * count)[:-1] + ',"oops"]'  # a parse error after all the floats
    return f'{{"inputs":[{{"name":"INPUT0","shape":[{count + 1}],"datatype":"FP32","data":{data}}}]}}'.encode()


def _invalid_requests() -> list[tuple[str, bytes, dict[str, str], int]]:
    binary, binary_headers = _binary(SIZE, extra_input=True)
    bad_json = _bad_json(2_000_000)  # 10 MB of JSON, some 100 MB of Python objects while parsed
    compressed = gzip.compress(b'{"inputs": [' + b" " * SIZE + b"oops", 1)
    return [
        ("/v2/models/identity_uint8/infer", binary, binary_headers, 400),
        ("/v2/models/identity_fp32/infer", bad_json, {}, 500),
        ("/v2/models/identity_fp32/infer", compressed, {"Content-Encoding": "gzip"}, 500),
        ("/v2/models/identity_uint8/infer", binary[: SIZE // 2], {**binary_headers, "Content-Encoding": "gzip"}, 400),
    ]


def _settled_rss(server: ServerProcess, baseline: int, margin: int) -> int:
    """The process's RSS once it has come back within ``margin`` KiB of ``baseline`` (or after 5 s)."""
    deadline = time.monotonic() + 5
    while (rss := rss_kib(server.process.pid)) - baseline > margin and time.monotonic() < deadline:
        time.sleep(0.1)
    return rss


def test_invalid_large_requests_leave_no_memory_behind(server: ServerProcess) -> None:
    invalid = _invalid_requests()
    for path, body, headers, status in invalid:  # warm up: first-use allocations are not leaks
        assert request(server.http_port, "POST", path, body, headers).status == status
    time.sleep(0.5)
    baseline = rss_kib(server.process.pid)
    for _ in range(4):
        for path, body, headers, status in invalid:
            assert request(server.http_port, "POST", path, body, headers).status == status
    margin = 24 * 1024  # KiB: half of one request's body
    assert _settled_rss(server, baseline, margin) - baseline <= margin


def test_a_valid_large_request_costs_few_copies(server: ServerProcess) -> None:
    body, headers = _binary(SIZE, extra_input=False)
    assert request(server.http_port, "POST", "/v2/models/identity_uint8/infer", body, headers).status == 200
    time.sleep(0.5)
    before = rss_kib(server.process.pid)
    peaks = []
    for _ in range(3):
        with open(f"/proc/{server.process.pid}/clear_refs", "w") as clear:  # reset VmHWM to the current RSS
            clear.write("5")
        response = request(server.http_port, "POST", "/v2/models/identity_uint8/infer", body, headers)
        assert response.status == 200
        assert len(response.body) > SIZE
        peaks.append(_hwm_kib(server) - before)
    # the request's body once and the response once (identity's output is its input); the probe saw five copies
    assert min(peaks) < 2.5 * SIZE / 1024, peaks
    assert _settled_rss(server, before, 24 * 1024) - before <= 24 * 1024


def _hwm_kib(server: ServerProcess) -> int:
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")
