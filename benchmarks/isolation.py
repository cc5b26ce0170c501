"""What process isolation costs a python model, next to the in-process mode and Triton's stub processes.

The python ``add_sub`` model (FP32 [16], dynamic batching) is served three ways in one run: by naiad
with ``INSTANCE_ISOLATION: "thread"``, by naiad with ``"process"``, and by Triton 2.51 (whose python
backend always runs a stub process); perf_analyzer measures each in turn over HTTP at concurrency 1 and
32, and the table gives medians, with the CPU time each server spends per inference (its worker or
stub processes included): what the process boundary costs beside what Triton's costs:

    python benchmarks/isolation.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from harness import Measurement, measure, median_of, print_table, reference_triton
from vs_triton import ADD_SUB, CONFIG

from naiad.testing import ModelRepositoryBuilder, free_ports, start_server

CONCURRENCIES = (1, 32)
PROCESS = '\nparameters { key: "INSTANCE_ISOLATION" value: { string_value: "process" } }\n'
THREAD = PROCESS.replace('"process"', '"thread"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        threads, processes = Path(folder) / "threads", Path(folder) / "processes"
        ModelRepositoryBuilder(threads).add_python_model("add_sub", ADD_SUB, CONFIG + THREAD)
        ModelRepositoryBuilder(processes).add_python_model("add_sub", ADD_SUB, CONFIG + PROCESS)
        servers: dict[str, tuple[str, int]] = {}
        for name, repository in (("naiad thread", threads), ("naiad process", processes)):
            server = start_server([repository])
            stack.callback(server.stop)
            servers[name] = (server.http_url, server.process.pid)
        ports = free_ports(3)
        triton = stack.enter_context(reference_triton(threads, (ports[0], ports[1], ports[2])))
        servers["Triton 2.51"] = (f"127.0.0.1:{ports[0]}", triton)
        runs: dict[tuple[str, int], list[Measurement]] = {}
        for concurrency in CONCURRENCIES:
            for _ in range(args.repeats):
                for name, (url, pid) in servers.items():
                    runs.setdefault((name, concurrency), []).append(
                        measure("add_sub", url, "http", concurrency, server_pid=pid)
                    )
    results = {key: median_of(values) for key, values in runs.items()}
    rows = []
    for concurrency in CONCURRENCIES:
        thread = results[("naiad thread", concurrency)]
        for name in servers:
            result = results[(name, concurrency)]
            rows.append(
                [
                    name,
                    concurrency,
                    f"{result.throughput:.0f}",
                    f"{result.throughput / thread.throughput:.2f}",
                    f"{result.p50_us / 1000:.2f}",
                    f"{result.p99_us / 1000:.2f}",
                    f"{result.cpu_us or 0:.0f}",
                ]
            )
    print_table(
        f"python add_sub over HTTP, median of {args.repeats}",
        ["server", "concurrency", "infer/s", "x thread", "p50 ms", "p99 ms", "CPU us/inference"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
