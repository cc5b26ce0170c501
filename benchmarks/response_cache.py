"""What the response cache buys: a repeated request answered from the cache against the model run.

Two copies of one python model that spends about 2 ms per request (a 256x256 float64 matrix
product, five times) are served side by side, ``cached`` with ``response_cache { enable: true }``
and ``uncached`` without, by naiad and by a real Triton 2.51, both started with ``--cache-config
local,size=16777216``. perf_analyzer sends the same random input with every request (its default),
so after the first request every ``cached`` one is a hit. Each server's two models are measured in
turns over gRPC at concurrency 4, ``--repeats`` times; the table gives medians, the cache's speedup
(cached over uncached, per server) and naiad's cached throughput over Triton's:

    python benchmarks/response_cache.py [--repeats 3] [--protocol grpc|http] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from harness import Measurement, measure, median_of, print_table, reference_triton

from naiad.testing import ModelRepositoryBuilder, free_ports, start_server

WORK = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.weights = np.random.default_rng(0).standard_normal((256, 256))

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            product = self.weights
            for _ in range(5):
                product = product @ self.weights / 16.0
            out = (data * float(product[0, 0])).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
"""

CONFIG = """
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{cache}
"""

CACHE_FLAG = "--cache-config=local,size=16777216"
MODELS = ("cached", "uncached")


def build_repository(root: Path) -> Path:
    repository = ModelRepositoryBuilder(root)
    repository.add_python_model("cached", WORK, CONFIG.format(cache="response_cache { enable: true }"))
    repository.add_python_model("uncached", WORK, CONFIG.format(cache=""))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        repository = build_repository(Path(folder) / "models")
        naiad = start_server([repository], CACHE_FLAG)
        stack.callback(naiad.stop)
        http_port, grpc_port, metrics_port = free_ports(3)
        stack.enter_context(reference_triton(repository, (http_port, grpc_port, metrics_port), CACHE_FLAG))
        urls = {
            "naiad": naiad.grpc_url if args.protocol == "grpc" else naiad.http_url,
            "triton": f"127.0.0.1:{grpc_port if args.protocol == 'grpc' else http_port}",
        }
        runs: dict[tuple[str, str], list[Measurement]] = {}
        for _ in range(args.repeats):
            for server, url in urls.items():
                for model in MODELS:
                    result = measure(model, url, args.protocol, args.concurrency)
                    runs.setdefault((server, model), []).append(result)
        medians = {key: median_of(values) for key, values in runs.items()}
        rows = [
            [server, model, medians[(server, model)].throughput, medians[(server, model)].p50_us]
            for server in urls
            for model in MODELS
        ]
        print_table(
            f"{args.protocol}, concurrency {args.concurrency}, medians of {args.repeats}",
            ["server", "model", "infer/s", "p50 us"],
            rows,
        )
        speedups = [
            [server, medians[(server, "cached")].throughput / medians[(server, "uncached")].throughput]
            for server in urls
        ]
        print_table("the cache's speedup (cached / uncached infer/s)", ["server", "speedup"], speedups)
        ratio = medians[("naiad", "cached")].throughput / medians[("triton", "cached")].throughput
        print(f"\nnaiad's cached throughput over Triton's: {ratio:.2f}x")


if __name__ == "__main__":
    main()
