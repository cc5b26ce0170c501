"""What process isolation costs a python model, next to the in-process mode and Triton's stub processes.

The python ``add_sub`` model (FP32 [16], dynamic batching) is served three ways in one run: by naiad
with ``INSTANCE_ISOLATION: "thread"``, by naiad with ``"process"``, and by Triton 2.51 (whose python
backend always runs a stub process); perf_analyzer measures each in turn over HTTP at concurrency 1 and
32, and the first table gives medians, with the CPU time each server spends per inference (its worker
or stub processes included).

The second table splits that CPU time by process. The model times its own ``execute`` (CPU time of
the thread that runs it) and counts the requests it served, so each server's numbers are per request
that reached the model: the server process alone, the process that runs ``model.py`` (naiad's worker,
Triton's stub; none in thread mode), the model's own ``execute``, and what the model's process spends
beyond ``execute``: that side of the boundary, where both servers do the same job (receive a batch,
build ``pb_utils`` requests, send the responses back):

    python benchmarks/isolation.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import Measurement, measure, median_of, own_cpu_seconds, print_table, reference_triton, tree_cpu_seconds
from vs_triton import ADD_SUB, CONFIG

from naiad.testing import ModelRepositoryBuilder, free_ports, start_server

CONCURRENCIES = (1, 32)
PROCESS = '\nparameters { key: "INSTANCE_ISOLATION" value: { string_value: "process" } }\n'
THREAD = PROCESS.replace('"process"', '"thread"')
REPORT = "execute_report"  # what the timed model writes into its model directory
REPORT_EVERY_S = 0.2

TIMED_ADD_SUB = (
    ADD_SUB
    + f'''

import os as _os
import time as _time


class _TimedAddSub(TritonPythonModel):
    """add_sub that writes the CPU time of its executes, their number and their requests to a file."""

    def initialize(self, args):
        super().initialize(args)
        self._report = _os.path.join(args["model_repository"], "{REPORT}")
        self._cpu, self._executions, self._requests, self._written = 0.0, 0, 0, 0.0

    def execute(self, requests):
        started = _time.thread_time()
        responses = super().execute(requests)
        self._cpu += _time.thread_time() - started
        self._executions += 1
        self._requests += len(requests)
        if _time.monotonic() - self._written > {REPORT_EVERY_S}:
            self._written = _time.monotonic()
            with open(self._report + ".new", "w") as report:
                report.write(f"{{self._cpu}} {{self._executions}} {{self._requests}}")
            _os.replace(self._report + ".new", self._report)
        return responses


TritonPythonModel = _TimedAddSub
'''
)


@dataclass(frozen=True)
class Split:
    """CPU microseconds per request that reached the model, by process, and requests per execution."""

    server: float
    model_process: float
    execute: float
    batch: float


class _Counters:
    """What one server has spent so far: its own CPU, its child processes' CPU, the model's report."""

    def __init__(self, pid: int, report: Path) -> None:
        time.sleep(2 * REPORT_EVERY_S)  # the model's report catches up with the requests it served
        own, tree = own_cpu_seconds(pid), tree_cpu_seconds(pid)
        cpu, executions, requests = report.read_text().split()
        self.own, self.children = own, tree - own
        self.execute, self.executions, self.requests = float(cpu), int(executions), int(requests)

    def split_since(self, before: _Counters) -> Split:
        requests = self.requests - before.requests
        return Split(
            (self.own - before.own) / requests * 1e6,
            (self.children - before.children) / requests * 1e6,
            (self.execute - before.execute) / requests * 1e6,
            requests / (self.executions - before.executions),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        repositories = {name: Path(folder) / name for name in ("threads", "processes", "triton")}
        for name, repository in repositories.items():
            config = CONFIG + {"threads": THREAD, "processes": PROCESS}.get(name, "")
            ModelRepositoryBuilder(repository).add_python_model("add_sub", TIMED_ADD_SUB, config)
        servers: dict[str, tuple[str, int, Path]] = {}
        for name, key in (("naiad thread", "threads"), ("naiad process", "processes")):
            server = start_server([repositories[key]])
            stack.callback(server.stop)
            servers[name] = (server.http_url, server.process.pid, repositories[key] / "add_sub" / REPORT)
        ports = free_ports(3)
        triton = stack.enter_context(reference_triton(repositories["triton"], (ports[0], ports[1], ports[2])))
        servers["Triton 2.51"] = (f"127.0.0.1:{ports[0]}", triton, repositories["triton"] / "add_sub" / REPORT)
        for url, _, _ in servers.values():  # a first execute writes each model's report
            measure("add_sub", url, "http", 1, interval_ms=500)
        runs: dict[tuple[str, int], list[Measurement]] = {}
        splits: dict[tuple[str, int], list[Split]] = {}
        for concurrency in CONCURRENCIES:
            for _ in range(args.repeats):
                for name, (url, pid, report) in servers.items():
                    before = _Counters(pid, report)
                    runs.setdefault((name, concurrency), []).append(
                        measure("add_sub", url, "http", concurrency, server_pid=pid)
                    )
                    splits.setdefault((name, concurrency), []).append(_Counters(pid, report).split_since(before))
    _print_throughput({key: median_of(values) for key, values in runs.items()}, list(servers), args.repeats)
    _print_split(splits, list(servers), args.repeats)
    return 0


def _print_throughput(results: dict[tuple[str, int], Measurement], names: list[str], repeats: int) -> None:
    rows = []
    for concurrency in CONCURRENCIES:
        thread = results[("naiad thread", concurrency)]
        for name in names:
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
        f"python add_sub over HTTP, median of {repeats}",
        ["server", "concurrency", "infer/s", "x thread", "p50 ms", "p99 ms", "CPU us/inference"],
        rows,
    )


def _print_split(splits: dict[tuple[str, int], list[Split]], names: list[str], repeats: int) -> None:
    rows = []
    for concurrency in CONCURRENCIES:
        for name in names:
            runs = splits[(name, concurrency)]
            server, model_process, execute, batch = (
                statistics.median(getattr(run, field) for run in runs)
                for field in ("server", "model_process", "execute", "batch")
            )
            beyond = statistics.median(run.model_process - run.execute for run in runs) if model_process else 0.0
            rows.append(
                [
                    name,
                    concurrency,
                    f"{batch:.1f}",
                    f"{server:.0f}",
                    f"{model_process:.0f}",
                    f"{execute:.0f}",
                    f"{beyond:.0f}" if model_process else "-",
                ]
            )
    print_table(
        f"CPU us per request by process, median of {repeats}",
        ["server", "concurrency", "requests/execution", "server", "model process", "execute", "beyond execute"],
        rows,
    )
    print("model process: naiad's worker, Triton's stub; beyond execute: the model process's side of the boundary")


if __name__ == "__main__":
    sys.exit(main())
