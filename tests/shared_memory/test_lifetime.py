"""Region lifetimes and safety, watched in the server's own address space (``/proc/<pid>/maps``)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
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


def _slow_request(
    client: httpclient.InferenceServerClient, inputs: str, outputs: str, gate: Path
) -> httpclient.InferAsyncRequest:
    data = httpclient.InferInput("INPUT0", [4], "FP32")
    data.set_shared_memory(inputs, 16)
    opener = httpclient.InferInput("GATE", [1], "BYTES")
    opener.set_data_from_numpy(np.array([str(gate).encode()], dtype=np.object_))
    requested = httpclient.InferRequestedOutput("OUTPUT0")
    requested.set_shared_memory(outputs, 16)
    return client.async_infer("slow_echo", [data, opener], outputs=[requested])


def test_unregister_while_in_use_unmaps_when_the_request_finishes(
    server: ServerProcess, client: httpclient.InferenceServerClient, registered: Registered, tmp_path: Path
) -> None:
    inputs, in_key, _ = registered(16, DATA)
    outputs, out_key, out_handle = registered(16)
    gate = tmp_path / "open"
    pending = _slow_request(client, inputs, outputs, gate)
    time.sleep(0.5)  # the request is in the model, holding both windows
    client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []
    assert _mapped(server, in_key)  # not unmapped under the request
    assert _mapped(server, out_key)
    client.register_system_shared_memory(inputs, in_key, 16)  # the name is free again at once
    gate.touch()
    pending.get_result(timeout=30)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [4]), DATA * 2)
    assert _eventually(lambda: not _mapped(server, out_key))  # its last user is gone
    assert _mapped(server, in_key)  # registered again
    client.unregister_system_shared_memory(inputs)
    assert _eventually(lambda: not _mapped(server, in_key))


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
