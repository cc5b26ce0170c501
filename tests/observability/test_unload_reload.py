"""A model's series and statistics disappear when it unloads and start again at zero when it loads;
a reload while it serves starts its statistics again but not its /metrics counters (as Triton).

The server runs in this process so the test can unload and reload through the model lifecycle
(the repository API that will do this over the wire is not part of naiad yet).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from naiad.dataplane import ServerState
from naiad.server import Server, ServerOptions
from naiad.testing import ModelRepositoryBuilder, free_ports

from .conftest import ADD_SUB, ADD_SUB_CONFIG


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _infer(url: str, model: str) -> None:
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    httpclient.InferenceServerClient(url).infer(model, inputs)


async def _aget(url: str) -> tuple[int, bytes]:
    """GET from a worker thread: the server answers on this thread's event loop."""
    return await asyncio.to_thread(_get, url)


async def _text(url: str) -> str:
    return (await _aget(url))[1].decode()


async def _success_lines(metrics_url: str) -> list[str]:
    text = await _text(metrics_url)
    return [line for line in text.splitlines() if line.startswith("nv_inference_request_success{")]


async def _until(check: Any) -> None:
    for _ in range(500):
        if await asyncio.to_thread(check):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition did not hold in time")


async def _scenario(repository: Path) -> None:
    http_port, grpc_port, metrics_port = free_ports(3)
    server = Server(
        ServerOptions(
            model_repositories=(repository,),
            http_address="127.0.0.1",
            http_port=http_port,
            grpc_address="127.0.0.1",
            grpc_port=grpc_port,
            metrics_port=metrics_port,
        )
    )
    serving = asyncio.create_task(server.run())
    http = f"127.0.0.1:{http_port}"
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    stats = f"http://{http}/v2/models/reloaded/stats"
    try:
        await _until(lambda: server.dataplane.state is ServerState.READY)
        await asyncio.to_thread(_infer, http, "reloaded")
        await asyncio.to_thread(_infer, http, "reloaded")
        await _until(lambda: json.loads(_get(stats)[1])["model_stats"][0]["inference_count"] == 2)
        assert 'nv_inference_request_success{model="reloaded",version="1"} 2' in await _success_lines(metrics)

        await asyncio.to_thread(server.lifecycle.unload_model, "reloaded")
        assert await _success_lines(metrics) == ['nv_inference_request_success{model="kept",version="1"} 0']
        assert "reloaded" not in await _text(metrics)
        assert await _aget(stats) == (400, b'{"error":"requested model \'reloaded\' is not available"}')
        every = json.loads(await _text(f"http://{http}/v2/models/stats"))["model_stats"]
        assert [entry["name"] for entry in every] == ["kept"]

        await asyncio.to_thread(server.lifecycle.load_model, "reloaded")
        text = await _text(metrics)
        assert 'nv_inference_request_success{model="reloaded",version="1"} 0' in text
        for reason in ("BACKEND", "CANCELED", "OTHER", "REJECTED"):
            assert f'nv_inference_request_failure{{model="reloaded",reason="{reason}",version="1"}} 0' in text
        fresh = json.loads(await _text(stats))["model_stats"][0]
        assert fresh["inference_count"] == fresh["execution_count"] == 0
        assert fresh["last_inference"] == 0
        await asyncio.to_thread(_infer, http, "reloaded")
        await _until(lambda: json.loads(_get(stats)[1])["model_stats"][0]["inference_count"] == 1)
        assert 'nv_inference_request_success{model="reloaded",version="1"} 1' in await _success_lines(metrics)

        # A reload while serving: as in Triton, the statistics start again, the /metrics counters go on.
        await asyncio.to_thread(server.lifecycle.load_model, "reloaded")
        assert json.loads(await _text(stats))["model_stats"][0]["inference_count"] == 0
        await asyncio.to_thread(_infer, http, "reloaded")
        await _until(lambda: json.loads(_get(stats)[1])["model_stats"][0]["inference_count"] == 1)
        text = await _text(metrics)
        assert 'nv_inference_request_success{model="reloaded",version="1"} 2' in text
        assert 'nv_inference_count{model="reloaded",version="1"} 2' in text
        assert 'nv_inference_exec_count{model="reloaded",version="1"} 2' in text
    finally:
        server.request_stop()
        await serving


def test_series_follow_unload_and_reload(tmp_path: Path) -> None:
    builder = ModelRepositoryBuilder(tmp_path / "models")
    for name in ("reloaded", "kept"):
        builder.add_python_model(name, ADD_SUB, ADD_SUB_CONFIG.format(max_batch_size=0, extra=""))
    asyncio.run(_scenario(builder.root))
