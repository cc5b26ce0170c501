"""Region lifetimes and safety, watched in the server's own address space (``/proc/<pid>/maps``)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

from .conftest import Region, Registered

DATA = np.array([1, 2, 3, 4], np.float32)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=2)
    yield client
    client.close()


def _mapped(server: ServerProcess, key: str) -> bool:
    """Whether the server maps the shared-memory object ``key``."""
    maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    return any(line.endswith(f"/dev/shm{key}") for line in maps.splitlines())


def _eventually(condition: object, timeout: float = 10.0) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def _slow_tensors(client: Any, inputs: str, outputs: str, gate: Path) -> tuple[list[Any], list[Any]]:
    """slow_echo's inputs (INPUT0 in region ``inputs``) and its output into region ``outputs``, for
    ``client`` (tritonclient.http or tritonclient.grpc); the model answers once ``gate`` exists."""
    data = client.InferInput("INPUT0", [4], "FP32")
    data.set_shared_memory(inputs, 16)
    opener = client.InferInput("GATE", [1], "BYTES")
    opener.set_data_from_numpy(np.array([str(gate).encode()], dtype=np.object_))
    requested = client.InferRequestedOutput("OUTPUT0")
    requested.set_shared_memory(outputs, 16)
    return [data, opener], [requested]


def _slow_request(
    client: httpclient.InferenceServerClient, inputs: str, outputs: str, gate: Path
) -> httpclient.InferAsyncRequest:
    tensors, requested = _slow_tensors(httpclient, inputs, outputs, gate)
    return client.async_infer("slow_echo", tensors, outputs=requested)


def test_a_region_in_use_is_not_unregistered_until_its_request_is_answered(
    server: ServerProcess, client: httpclient.InferenceServerClient, registered: Registered, tmp_path: Path
) -> None:
    """Triton's answers: the region stays registered (and mapped) while a request uses it."""
    outputs, out_key, out_handle = registered(16)
    inputs, in_key, _ = registered(16, DATA)
    _, spare_key, _ = registered(16)
    gate = tmp_path / "open"
    pending = _slow_request(client, inputs, outputs, gate)
    time.sleep(1.0)  # the request is in the model, holding both windows
    with pytest.raises(InferenceServerException) as caught:
        client.unregister_system_shared_memory(outputs)
    assert caught.value.status() == "500"
    assert caught.value.message() == f"Cannot unregister shared memory region '{outputs}', it is currently in use."
    with pytest.raises(InferenceServerException) as caught:
        client.unregister_system_shared_memory()
    in_use = sorted([inputs, outputs])
    assert caught.value.message() == (
        f"Failed to unregister the following system shared memory regions: {in_use[0]} ,{in_use[1]} ,"
    )
    assert sorted(region["name"] for region in client.get_system_shared_memory_status()) == in_use
    assert not _mapped(server, spare_key)  # the free one went
    assert _mapped(server, in_key)
    gate.touch()
    pending.get_result(timeout=30)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [4]), DATA * 2)
    client.unregister_system_shared_memory()  # answered: nothing uses them now
    assert client.get_system_shared_memory_status() == []
    assert _eventually(lambda: not _mapped(server, in_key) and not _mapped(server, out_key))


def test_a_region_in_use_over_grpc_is_refused_with_grpc_internal(
    server: ServerProcess, client: httpclient.InferenceServerClient, registered: Registered, tmp_path: Path
) -> None:
    inputs, _, _ = registered(16, DATA)
    outputs, _, _ = registered(16)
    gate = tmp_path / "open"
    with grpcclient.InferenceServerClient(server.grpc_url) as grpc:
        tensors, requested = _slow_tensors(grpcclient, inputs, outputs, gate)
        results: list[tuple[object, object]] = []
        grpc.async_infer("slow_echo", tensors, lambda result, error: results.append((result, error)), outputs=requested)
        time.sleep(1.0)  # the request is in the model, holding both windows
        with pytest.raises(InferenceServerException) as caught:
            grpc.unregister_system_shared_memory(inputs)
        assert caught.value.status() == "StatusCode.INTERNAL"
        assert caught.value.message() == f"Cannot unregister shared memory region '{inputs}', it is currently in use."
        gate.touch()
        assert _eventually(lambda: bool(results))
        assert results[0][1] is None
        grpc.unregister_system_shared_memory()
        assert grpc.get_system_shared_memory_status().regions == {}


def test_an_input_only_region_is_never_mapped_writable(
    server: ServerProcess, client: httpclient.InferenceServerClient, registered: Registered, tmp_path: Path
) -> None:
    inputs, in_key, _ = registered(16, DATA)
    outputs, out_key, _ = registered(16)
    gate = tmp_path / "open"
    gate.touch()
    _slow_request(client, inputs, outputs, gate).get_result(timeout=30)
    maps = Path(f"/proc/{server.process.pid}/maps").read_text().splitlines()
    permissions = {
        key: {line.split()[1] for line in maps if line.endswith(f"/dev/shm{key}")} for key in (in_key, out_key)
    }
    assert permissions[in_key] == {"r--s"}
    assert "rw-s" in permissions[out_key]


def test_an_object_shrunk_after_registration_is_refused_not_read(
    server: ServerProcess, client: httpclient.InferenceServerClient, region: Region
) -> None:
    """Reading a mapped page past the end of its object would kill the server (SIGBUS)."""
    name, key, _ = region(8192)
    client.register_system_shared_memory(name, key, 16, offset=4096)
    os.truncate(f"/dev/shm{key}", 100)
    data = httpclient.InferInput("INPUT0", [4], "FP32")
    data.set_shared_memory(name, 16)
    opener = httpclient.InferInput("GATE", [1], "BYTES")
    opener.set_data_from_numpy(np.array([b"/"], dtype=np.object_))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("slow_echo", [data, opener])
    assert caught.value.status() == "400"
    assert f"shared memory region '{name}' no longer fits in '{key}'" in caught.value.message()
    assert httpx.get(f"http://{server.http_url}/v2/health/live").status_code == 200
