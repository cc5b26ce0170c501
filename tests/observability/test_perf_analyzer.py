"""The real perf_analyzer measures naiad over HTTP and gRPC and reads its statistics, as it does Triton's.

perf_analyzer reads server metadata (to see the statistics extension), model metadata and config,
and the model's statistics before and after every measurement window; it aborts on any answer it
cannot parse. The binary is installed on first use by ``benchmarks/harness.py`` (tritonclient 2.51
wheel, Debian's libb64, the CUDA runtime wheel; no GPU) under ``$NAIAD_BENCH_HOME``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

from .conftest import model_stats

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "harness.py"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("naiad_benchmark_harness", HARNESS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def perf_analyzer() -> tuple[Path, dict[str, str]]:
    try:
        binary, env = _harness().perf_analyzer()
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.fail(f"perf_analyzer could not be installed (it needs PyPI and Debian's libb64-0d): {error}")
    return binary, env


def _run(perf_analyzer: tuple[Path, dict[str, str]], *args: str) -> str:
    binary, env = perf_analyzer
    command = [
        str(binary),
        *args,
        "--concurrency-range=2",
        "--measurement-interval=1000",
        # What is tested is that perf_analyzer reads the server's statistics, not that a small shared
        # machine is steady: any run is accepted after its minimum windows (as benchmarks/harness.py does).
        "--stability-percentage=999",
        "--max-trials=3",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "error" not in output.lower(), output
    # The server side of the report comes from the statistics extension.
    server = re.search(r"Server:\s*\n\s*Inference count: (\d+)\s*\n\s*Execution count: (\d+)", output)
    assert server is not None, output
    assert int(server.group(1)) > 0
    assert "Successful request count" in output
    return output


@pytest.mark.timeout(900)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_reads_statistics(
    server: ServerProcess, perf_analyzer: tuple[Path, dict[str, str]], protocol: str
) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    _run(perf_analyzer, "-m", "perf", "-u", url, "-i", protocol)
    _run(perf_analyzer, "-m", "perf_batched", "-b", "2", "-u", url, "-i", protocol)
    for model in ("perf", "perf_batched"):
        stats = model_stats(server, model)
        assert stats["inference_stats"]["fail"]["count"] == 0
        assert stats["inference_stats"]["success"]["count"] > 0
    assert model_stats(server, "perf_batched")["inference_count"] % 2 == 0


@pytest.mark.timeout(900)
def test_perf_analyzer_streams_a_decoupled_model(
    server: ServerProcess, perf_analyzer: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"data": [{"IN": [2]}]}))
    output = _run(
        perf_analyzer, "-m", "perf_stream", "-u", server.grpc_url, "-i", "grpc", "--streaming", f"--input-data={data}"
    )
    assert "Response Throughput" in output
    stats = model_stats(server, "perf_stream")
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["response_stats"]["1"]["success"]["count"] == stats["inference_stats"]["success"]["count"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_through_system_shared_memory(
    server: ServerProcess, perf_analyzer: tuple[Path, dict[str, str]], protocol: str
) -> None:
    """perf_analyzer registers its own regions, sends every input and receives every output through them,
    and unregisters them at the end."""
    url = server.http_url if protocol == "http" else server.grpc_url
    before = model_stats(server, "perf_batched")["inference_stats"]["success"]["count"]
    _run(perf_analyzer, "-m", "perf_batched", "-b", "2", "-u", url, "-i", protocol, "--shared-memory=system")
    stats = model_stats(server, "perf_batched")
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["inference_stats"]["success"]["count"] > before
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        assert client.get_system_shared_memory_status() == []
    finally:
        client.close()
