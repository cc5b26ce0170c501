"""What statistics and metrics cost: throughput with them on and off, and their CPU time per request.

Three naiad servers serve the same python identity model (FP32 [16], one instance): one with
``--collect-statistics=false --allow-metrics=false`` (no statistics, no metrics), one with the
defaults (statistics extension and metrics on), one that adds every opt-in family
(``histogram_latencies`` and ``summary_latencies``). While a server with metrics is measured, a
scraper reads its ``/metrics`` every 5 s. Three measurements, each taken in turns over the
variants so that load changes on the machine hit them alike:

1. server CPU time per request: a fixed number of requests from client threads, and the server
   process's CPU time (``/proc/<pid>/stat``) they cost. Steady even on a busy machine;
2. throughput and latency from perf_analyzer (which also reads the statistics around every
   window); noisy on small shared machines, so read it with the repeat-to-repeat spread in mind;
3. the statistics path alone, in this process: tracking a request, the timed ``execute`` and the
   response pipeline's statistics stage, against the same path without them.

    python benchmarks/metrics_overhead.py [--repeats 5] [--requests 4000] [--concurrency 4]
                                          [--protocols http grpc] [--skip-perf-analyzer]

Target: statistics and metrics cost under 3 % of throughput (1 and 2).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from harness import Measurement, measure, median_of, print_table

from naiad.backend import (
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    InstanceRunner,
    ModelConfig,
    ModelInstance,
    RequestedOutput,
    ResponseSender,
    Tensor,
)
from naiad.inference import Deliver
from naiad.pipeline import build_pipeline
from naiad.statistics import ModelStatistics
from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

SCRAPE_INTERVAL_S = 5.0

VARIANTS = {
    "off": ("--collect-statistics=false", "--allow-metrics=false"),
    "on (default)": (),
    "on + histograms + summaries": (
        "--metrics-config=histogram_latencies=true",
        "--metrics-config=summary_latencies=true",
    ),
}


class Scraper:
    """Reads ``/metrics`` every ``interval`` seconds in a thread, like a Prometheus (which defaults to 15-60 s)."""

    def __init__(self, port: int, interval: float = SCRAPE_INTERVAL_S) -> None:
        self._url = f"http://127.0.0.1:{port}/metrics"
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.scrapes = 0

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with urllib.request.urlopen(self._url, timeout=10) as response:
                response.read()
            self.scrapes += 1


def _rotated(names: list[str], by: int) -> list[str]:
    """The variants in a different order each round (no variant always runs first)."""
    by %= len(names)
    return names[by:] + names[:by]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _send(url: str, protocol: str, count: int) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(url)
    tensor = module.InferInput("IN", [16], "FP32")
    tensor.set_data_from_numpy(np.ones(16, dtype=np.float32))
    for _ in range(count):
        client.infer("identity", [tensor])
    client.close()


def cpu_per_request(server: ServerProcess, protocol: str, requests: int, concurrency: int) -> float:
    """Server CPU microseconds per request, over ``requests`` sent by ``concurrency`` client threads."""
    url = server.http_url if protocol == "http" else server.grpc_url
    _send(url, protocol, 50)  # warm up connections and the model
    before = _cpu_seconds(server.process.pid)
    threads = [
        threading.Thread(target=_send, args=(url, protocol, requests // concurrency)) for _ in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (_cpu_seconds(server.process.pid) - before) / (requests // concurrency * concurrency) * 1e6


def end_to_end(protocols: Sequence[str], concurrency: int, repeats: int, requests: int, perf: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        builder = ModelRepositoryBuilder(Path(folder) / "models")
        builder.add_python_model("identity", IDENTITY, CONFIG)
        servers: dict[str, ServerProcess] = {}
        try:
            for name, flags in VARIANTS.items():
                servers[name] = start_server([builder.root], *flags)
            for protocol in protocols:
                cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
                for round_index in range(repeats):
                    for name in _rotated(list(servers), round_index):
                        server = servers[name]
                        with Scraper(server.metrics_port) if name != "off" else contextlib.nullcontext():
                            cpu[name].append(cpu_per_request(server, protocol, requests, concurrency))
                base = statistics.median(cpu["off"])
                print_table(
                    f"{protocol.upper()}: server CPU per request, {requests} requests from {concurrency} threads, "
                    f"median of {repeats}",
                    ["statistics + metrics", "CPU us/request", "cost %", "spread (min-max) us"],
                    [
                        [
                            name,
                            statistics.median(values),
                            100 * (statistics.median(values) / base - 1),
                            f"{min(values):.0f}-{max(values):.0f}",
                        ]
                        for name, values in cpu.items()
                    ],
                )
                if not perf:
                    continue
                runs: dict[str, list[Measurement]] = {name: [] for name in VARIANTS}
                for round_index in range(repeats):  # in turns: drifts in machine load hit every variant alike
                    for name in _rotated(list(servers), round_index):
                        server = servers[name]
                        url = server.http_url if protocol == "http" else server.grpc_url
                        with Scraper(server.metrics_port) if name != "off" else contextlib.nullcontext():
                            runs[name].append(measure("identity", url, protocol, concurrency, interval_ms=3000))
                results = {name: median_of(values) for name, values in runs.items()}
                baseline = results["off"].throughput
                print_table(
                    f"{protocol.upper()} throughput, concurrency {concurrency}, median of {repeats} "
                    f"(metrics scraped every {SCRAPE_INTERVAL_S:.0f} s)",
                    ["statistics + metrics", "infer/s", "cost %", "p50 us", "p99 us"],
                    [
                        [name, r.throughput, 100 * (1 - r.throughput / baseline), r.p50_us, r.p99_us]
                        for name, r in results.items()
                    ],
                )
                cost = 100 * (1 - results["on (default)"].throughput / baseline)
                print(f"{protocol}: default metrics cost {cost:.2f} % of throughput (target < 3 %)")
        finally:
            for server in servers.values():
                server.stop()


class _Answer(ModelInstance):
    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            request.sender.send(InferenceResponse(), final=True)


_DATA = np.zeros(16, dtype=np.float32)
_OUTPUTS = {"OUT": RequestedOutput("OUT")}


def _request(pipeline: Deliver) -> InferenceRequest:
    tensor = Tensor("IN", "FP32", _DATA)
    return InferenceRequest("identity", 1, {"IN": tensor}, dict(_OUTPUTS), ResponseSender(lambda event: None, pipeline))


def _runner(statistics: ModelStatistics | None) -> InstanceRunner:
    context = InstanceContext("identity", 1, Path("identity"), "identity_0", "CPU", 0, ModelConfig(), "{}")
    return InstanceRunner(context, _Answer(), decoupled=False, statistics=statistics)


def per_request_cost(count: int = 50_000, rounds: int = 7) -> None:
    """CPU time of the request path with and without statistics, in-process.

    Each round builds, executes (through the instance runner, as the schedulers do) and answers
    ``count`` requests one by one (few objects alive at a time, as in the server); the difference
    between the two loops is what statistics cost.
    """
    bare, bare_pipeline = _runner(None), build_pipeline([])
    stats = ModelStatistics("identity", 1)
    counted_runner, counted_pipeline = _runner(stats), build_pipeline([stats.stage()])

    def without() -> float:
        start = time.process_time_ns()
        for _ in range(count):
            bare.execute((_request(bare_pipeline),))
        return (time.process_time_ns() - start) / count

    def with_statistics() -> float:
        start = time.process_time_ns()
        for _ in range(count):
            request = _request(counted_pipeline)
            stats.track(request)
            counted_runner.execute((request,))
        return (time.process_time_ns() - start) / count

    plain: list[float] = []
    counted: list[float] = []
    for _ in range(rounds):  # in turns, so load changes on the machine hit both alike
        plain.append(without())
        counted.append(with_statistics())
    base, total = statistics.median(plain), statistics.median(counted)
    print_table(
        f"CPU time per request in-process, median of {rounds} x {count}",
        ["path", "ns/request"],
        [
            ["build request, execute, answer (no statistics)", base],
            ["the same with statistics", total],
            ["statistics alone", total - base],
        ],
    )
    print(f"statistics add {(total - base) / 1000:.2f} us of CPU per request")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    parser.add_argument("--requests", type=int, default=4000, help="requests per server-CPU measurement")
    parser.add_argument("--skip-perf-analyzer", action="store_true", help="no perf_analyzer throughput runs")
    parser.add_argument("--skip-end-to-end", action="store_true", help="only the in-process CPU-time part")
    args = parser.parse_args()
    if not args.skip_end_to_end:
        end_to_end(args.protocols, args.concurrency, args.repeats, args.requests, not args.skip_perf_analyzer)
    per_request_cost()
    return 0


if __name__ == "__main__":
    sys.exit(main())
