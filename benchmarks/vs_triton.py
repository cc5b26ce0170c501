"""naiad next to a real Triton 2.51 on the same python model, with the same perf_analyzer.

The python ``add_sub`` model (FP32 [16], dynamic batching) is served by naiad and by Triton at the
same time; perf_analyzer measures them in turns (one run each, ``--repeats`` times) over HTTP and
gRPC at concurrency 1, 8 and 32, so load changes on the machine hit them alike, and the table gives
medians and naiad/Triton ratios. It also gives the CPU time each server (with its child processes:
naiad's python workers, Triton's python stubs) spends per inference, and Triton's over naiad's: the
work each does per core, which this 2-core machine's noise disturbs far less than throughput:

    python benchmarks/vs_triton.py [--repeats 5] [--protocols http grpc] [--baseline DIR]

``--baseline DIR`` also serves the model with another naiad checkout (e.g. ``git worktree add
/tmp/naiad-base <rev>``; its ``core`` and ``plugins/python`` go first on ``PYTHONPATH``), measured in
the same turns, and adds the ratio of this naiad over it: the way to show a change costs nothing.

Targets of the request-path issue: over HTTP at concurrency 32 at least 1.0x Triton's throughput,
over gRPC at least 0.8x; at concurrency 1 a p50 no higher than Triton's. ``benchmarks/ceiling.py``
shows what the server libraries underneath allow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

from harness import Measurement, measure, median_of, print_table, reference_triton

from naiad.testing import ModelRepositoryBuilder, free_ports, start_server

ADD_SUB = """
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (a + b).astype(self.dtype))
            out1 = pb_utils.Tensor("OUTPUT1", (a - b).astype(self.dtype))
            responses.append(pb_utils.InferenceResponse([out0, out1]))
        return responses
"""

CONFIG = """
name: "add_sub"
backend: "python"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

CONCURRENCIES = (1, 8, 32)


def _baseline_env(checkout: Path) -> dict[str, str]:
    paths = [checkout / "core", checkout / "plugins" / "python", os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(str(path) for path in paths if str(path))}


def _measure_in_turns(
    servers: dict[str, tuple[str, str, int]], protocols: list[str], repeats: int
) -> dict[str, dict[tuple[str, int], Measurement]]:
    """server name -> (protocol, concurrency) -> median; each repeat measures every server once."""
    runs: dict[str, dict[tuple[str, int], list[Measurement]]] = {name: {} for name in servers}
    for protocol in protocols:
        for concurrency in CONCURRENCIES:
            for _ in range(repeats):
                for name, (http_url, grpc_url, pid) in servers.items():
                    url = http_url if protocol == "http" else grpc_url
                    runs[name].setdefault((protocol, concurrency), []).append(
                        measure("add_sub", url, protocol, concurrency, server_pid=pid)
                    )
    return {name: {key: median_of(values) for key, values in by_key.items()} for name, by_key in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    parser.add_argument("--baseline", type=Path, help="another naiad checkout to measure in the same turns")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        repository = Path(folder) / "models"
        ModelRepositoryBuilder(repository).add_python_model("add_sub", ADD_SUB, CONFIG)
        naiad = start_server([repository])
        stack.callback(naiad.stop)
        servers = {"naiad": (naiad.http_url, naiad.grpc_url, naiad.process.pid)}
        if args.baseline is not None:
            baseline = start_server([repository], env=_baseline_env(args.baseline.resolve()))
            stack.callback(baseline.stop)
            servers["baseline"] = (baseline.http_url, baseline.grpc_url, baseline.process.pid)
        ports = free_ports(3)
        triton = stack.enter_context(reference_triton(repository, (ports[0], ports[1], ports[2])))
        servers["triton"] = (f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}", triton)
        results = _measure_in_turns(servers, args.protocols, args.repeats)
    rows = []
    for key, ours in results["naiad"].items():
        theirs = results["triton"][key]
        row: list[object] = [key[0], key[1], ours.throughput, theirs.throughput, ours.throughput / theirs.throughput]
        if "baseline" in results:
            base = results["baseline"][key]
            row += [base.throughput, ours.throughput / base.throughput, base.p50_us / 1000]
        row += [ours.p50_us / 1000, theirs.p50_us / 1000, ours.p99_us / 1000, theirs.p99_us / 1000]
        assert ours.cpu_us is not None
        assert theirs.cpu_us is not None
        row += [round(ours.cpu_us), round(theirs.cpu_us), theirs.cpu_us / ours.cpu_us]
        rows.append(row)
    header = ["proto", "conc", "naiad inf/s", "triton inf/s", "ratio"]
    if "baseline" in results:
        header += ["baseline inf/s", "naiad/baseline", "baseline p50"]
    header += ["naiad p50", "triton p50", "naiad p99", "triton p99", "naiad cpu", "triton cpu", "cpu ratio"]
    print_table(
        f"python add_sub FP32[16], dynamic batching, median of {args.repeats} (naiad / Triton 2.51)", header, rows
    )
    print("latencies in ms; cpu: the server's CPU microseconds per inference; cpu ratio: Triton's over naiad's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
