"""What dynamic batching and a second instance buy: throughput and latency side by side.

A python model pays a fixed 5 ms per execute whatever the batch size (like a GPU kernel
launch). perf_analyzer sends single-row requests from many concurrent clients to four
variants of it served by one naiad process:

    python benchmarks/batching.py [--concurrency 32] [--repeats 3]

Targets: batching at least 8x the throughput of no batching at concurrency 32, with p99
latency under 2 x (queue delay + execution time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness import Measurement, measure, median_of, print_table

from naiad.testing import ModelRepositoryBuilder, start_server

EXECUTE_SECONDS = 0.005
QUEUE_DELAY_US = 2000

FIXED_COST = f"""
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep({EXECUTE_SECONDS})
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy())]) for r in requests]
"""

VARIANTS = {
    "one_instance": ("", 1),
    "two_instances": ("", 2),
    "batching": (f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}", 1),
    "batching_two_instances": (f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}", 2),
}


def build_repository(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    for name, (batching, instances) in VARIANTS.items():
        builder.add_python_model(
            name,
            FIXED_COST,
            f"""
            backend: "python"
            max_batch_size: 32
            input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 16 ] }} ]
            output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] }} ]
            instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
            {batching}
            """,
        )
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server([build_repository(Path(folder) / "models")])
        try:
            results: dict[str, Measurement] = {}
            for name in VARIANTS:
                runs = [measure(name, server.http_url, "http", args.concurrency) for _ in range(args.repeats)]
                results[name] = median_of(runs)
        finally:
            server.stop()
    baseline = results["one_instance"].throughput
    bound_us = 2 * (QUEUE_DELAY_US + EXECUTE_SECONDS * 1e6)
    rows = [
        [name, result.throughput, result.throughput / baseline, result.p50_us / 1000, result.p99_us / 1000]
        for name, result in results.items()
    ]
    print_table(
        f"dynamic batching, {EXECUTE_SECONDS * 1000:.0f} ms per execute, HTTP, concurrency {args.concurrency}, "
        f"median of {args.repeats}",
        ["model", "infer/s", "x one_instance", "p50 ms", "p99 ms"],
        rows,
    )
    speedup = results["batching"].throughput / baseline
    p99_ok = results["batching"].p99_us < bound_us
    print(
        f"\nbatching speedup {speedup:.1f}x (target >= 8x); p99 {results['batching'].p99_us / 1000:.1f} ms "
        f"(target < {bound_us / 1000:.1f} ms): {'met' if speedup >= 8 and p99_ok else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
