"""The registry and its system regions in-process: windows, read-only objects, unaligned offsets, CUDA
without a GPU."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.errors import ErrorCode, NaiadError
from naiad.shared_memory import SYSTEM, RegionReference, SharedMemoryRegistry
from naiad.shared_memory import system as system_regions
from naiad.testing import ModelRepositoryBuilder, start_server

from .conftest import Region


@pytest.fixture
def registry() -> Iterator[SharedMemoryRegistry]:
    registry = SharedMemoryRegistry()
    yield registry
    registry.close()


def test_unaligned_windows_read_the_right_bytes(registry: SharedMemoryRegistry, region: Region) -> None:
    _, key, handle = region(3 * 4096)
    handle._mpsm_handle.buf[:] = bytes(range(256)) * 48
    registry.register_system("r", key, 4100, 300)
    window = registry.window(RegionReference("r", 7, 5), writable=False)
    assert window.memory is not None
    assert window.memory.readonly
    assert bytes(window.memory) == bytes((4100 + 7 + index) % 256 for index in range(5))
    with pytest.raises(TypeError):
        window.memory[0] = 1


def test_writes_land_inside_the_window_only(registry: SharedMemoryRegistry, region: Region) -> None:
    _, key, handle = region(8192)
    registry.register_system("r", key, 4000, 200)
    window = registry.window(RegionReference("r", 10, 4), writable=True)
    assert window.memory is not None
    window.memory[:] = b"abcd"
    content = bytes(handle._mpsm_handle.buf)
    assert content[4010:4014] == b"abcd"
    assert content.count(0) == 8192 - 4


@pytest.mark.parametrize(("offset", "byte_size"), [(200, 1), (199, 2), (0, 0), (0, 201), (2**63, 1), (1, 2**64)])
def test_windows_outside_the_region_are_refused(
    registry: SharedMemoryRegistry, region: Region, offset: int, byte_size: int
) -> None:
    _, key, _ = region(4096)
    registry.register_system("r", key, 0, 200)
    with pytest.raises(NaiadError) as caught:
        registry.window(RegionReference("r", offset, byte_size), writable=True)
    assert caught.value.code is ErrorCode.INVALID_ARG


def test_a_live_window_keeps_its_region_registered(registry: SharedMemoryRegistry, region: Region) -> None:
    _, key, _ = region(64)
    registry.register_system("r", key, 0, 64)
    registry.register_system("free", key, 0, 64)
    window = registry.window(RegionReference("r", 0, 4), writable=False)
    with pytest.raises(NaiadError) as caught:
        registry.unregister(SYSTEM, "r")
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.message == "Cannot unregister shared memory region 'r', it is currently in use."
    with pytest.raises(NaiadError) as caught:
        registry.unregister(SYSTEM)
    assert caught.value.message == "Failed to unregister the following system shared memory regions: r ,"
    assert [status["name"] for status in registry.status(SYSTEM)] == ["r"]
    del window
    registry.unregister(SYSTEM)
    assert registry.status(SYSTEM) == []


def test_a_view_outlives_the_server_closing_its_regions(registry: SharedMemoryRegistry, region: Region) -> None:
    _, key, handle = region(64)
    handle._mpsm_handle.buf[:4] = b"keep"
    registry.register_system("r", key, 0, 64)
    window = registry.window(RegionReference("r", 0, 4), writable=False)
    registry.close()
    assert registry.status(SYSTEM) == []
    assert window.memory is not None
    assert bytes(window.memory) == b"keep"


def test_an_object_the_server_may_only_read_serves_inputs_only(
    registry: SharedMemoryRegistry, region: Region, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a server user without write permission on the object sees it (root may always write)."""
    _, key, handle = region(64)
    handle._mpsm_handle.buf[:4] = b"read"
    real_open = os.open

    def refuse_writing(path: str, flags: int, *args: int) -> int:
        if flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(system_regions.os, "open", refuse_writing)
    registry.register_system("r", key, 0, 64)
    window = registry.window(RegionReference("r", 0, 4), writable=False)
    assert window.memory is not None
    assert bytes(window.memory) == b"read"
    with pytest.raises(NaiadError, match="shared memory region 'r' is read-only"):
        registry.window(RegionReference("r", 0, 4), writable=True)


def test_only_regular_shared_memory_objects_are_opened(registry: SharedMemoryRegistry) -> None:
    fifo = f"/dev/shm/naiad_fifo_{os.getpid()}"
    os.mkfifo(fifo)
    try:
        with pytest.raises(NaiadError, match="is not a shared-memory object"):
            registry.register_system("r", fifo.removeprefix("/dev/shm"), 0, 8)
    finally:
        os.unlink(fifo)


def test_cuda_routes_without_a_gpu(tmp_path: Path) -> None:
    """As a server sees it where no CUDA device is visible (hidden on a machine that has one)."""
    server = start_server([ModelRepositoryBuilder(tmp_path / "models").root], env={"CUDA_VISIBLE_DEVICES": ""})
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        # listed all the same, as Triton's CPU build lists it
        assert "cuda_shared_memory" in http.get_server_metadata()["extensions"]
        assert "cuda_shared_memory" in grpc.get_server_metadata().extensions
        url = f"http://{server.http_url}/v2/cudasharedmemory/region/c/register"
        short = httpx.post(url, json={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 8})
        assert (short.status_code, short.json()) == (
            400,
            {"error": "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"},
        )
        response = httpx.post(url, json={"raw_handle": {"b64": "A" * 86 + "=="}, "device_id": 0, "byte_size": 8})
        assert response.status_code == 400
        assert response.json()["error"].startswith(
            "failed to register CUDA shared memory region: 'c', GPUs not supported: this server has no GPU"
        )
        with pytest.raises(Exception, match="GPUs not supported") as caught:
            grpc.register_cuda_shared_memory("c", b"\0" * 64, 0, 8)
        assert "INVALID_ARGUMENT" in str(caught.value.status())  # type: ignore[attr-defined]
        assert http.get_cuda_shared_memory_status() == []
        for body, field in ((b"[]", "raw_handle"), (b"null", "raw_handle")):
            refused = httpx.post(url, content=body)
            assert refused.json() == {"error": f"Shared memory register request has no '{field}' field"}
        system = httpx.post(f"http://{server.http_url}/v2/systemsharedmemory/region/s/register", content=b'"s"')
        assert (system.status_code, system.json()) == (
            400,
            {"error": "Shared memory register request has no 'key' field"},
        )
        http.unregister_cuda_shared_memory()
        grpc.unregister_cuda_shared_memory("c")
    finally:
        http.close()
        grpc.close()
        server.stop()
