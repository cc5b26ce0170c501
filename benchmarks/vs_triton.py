"""naiad next to a real Triton 2.51 on the same python model, with the same perf_analyzer.

The python ``add_sub`` model (FP32 [16], dynamic batching) is served by naiad and then by
Triton, one after the other in this run; perf_analyzer measures both over HTTP and gRPC at
concurrency 1, 8 and 32, and the table gives naiad/Triton ratios:

    python benchmarks/vs_triton.py [--repeats 3] [--protocols http grpc]

Target of the scheduling issue: at least 0.5x Triton's throughput at concurrency 32.
"""

from __future__ import annotations

import argparse
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


def _measure_all(
    http_url: str, grpc_url: str, protocols: list[str], repeats: int
) -> dict[tuple[str, int], Measurement]:
    results = {}
    for protocol in protocols:
        url = http_url if protocol == "http" else grpc_url
        for concurrency in CONCURRENCIES:
            runs = [measure("add_sub", url, protocol, concurrency) for _ in range(repeats)]
            results[(protocol, concurrency)] = median_of(runs)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        repository = Path(folder) / "models"
        ModelRepositoryBuilder(repository).add_python_model("add_sub", ADD_SUB, CONFIG)
        server = start_server([repository])
        try:
            naiad = _measure_all(server.http_url, server.grpc_url, args.protocols, args.repeats)
        finally:
            server.stop()
        ports = free_ports(3)
        with reference_triton(repository, (ports[0], ports[1], ports[2])):
            triton = _measure_all(f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}", args.protocols, args.repeats)
    rows = []
    for key in naiad:
        ours, theirs = naiad[key], triton[key]
        rows.append(
            [
                key[0],
                key[1],
                ours.throughput,
                theirs.throughput,
                ours.throughput / theirs.throughput,
                ours.p50_us / 1000,
                theirs.p50_us / 1000,
                ours.p99_us / 1000,
                theirs.p99_us / 1000,
            ]
        )
    print_table(
        f"python add_sub FP32[16], dynamic batching, median of {args.repeats} (naiad / Triton 2.51)",
        ["proto", "conc", "naiad inf/s", "triton inf/s", "ratio", "naiad p50", "triton p50", "naiad p99", "triton p99"],
        rows,
    )
    print("latencies in ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
