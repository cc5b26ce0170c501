"""What system shared memory buys for a 4 MiB input: latency of one request at a time, side by side.

An ONNX model sums a 4 MiB FP32 input (onnxruntime reads the client's region without a copy).
Each round sends the same input four ways, alternating, from one tritonclient per protocol:
binary HTTP, HTTP with the input in system shared memory, gRPC raw contents, gRPC with shared memory:

    python benchmarks/shared_memory.py [--rounds 5] [--requests 40]

Prints the median latency of each way, and the socket's latency over shared memory's per protocol.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from harness import print_table

from naiad.testing import ModelRepositoryBuilder, start_server

ELEMENTS = 1 << 20  # 4 MiB of FP32
CONFIG = f"""
backend: "onnxruntime"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {ELEMENTS} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""


def _sum_model() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["X"], ["Y"], keepdims=1)],
        "sum",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [ELEMENTS])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _requests(http_url: str, grpc_url: str, data: np.ndarray, key: str) -> dict[str, Callable[[], Any]]:
    """One callable per way of sending ``data``; the shared-memory ways read it from region ``key``."""
    http = httpclient.InferenceServerClient(http_url)
    grpc = grpcclient.InferenceServerClient(grpc_url)
    http.register_system_shared_memory("bench", key, data.nbytes)

    def tensor(module: Any, in_region: bool) -> Any:
        made = module.InferInput("X", [ELEMENTS], "FP32")
        if in_region:
            made.set_shared_memory("bench", data.nbytes)
        else:
            made.set_data_from_numpy(data, **({"binary_data": True} if module is httpclient else {}))
        return made

    return {
        "HTTP binary": lambda: http.infer("sum", [tensor(httpclient, False)]),
        "HTTP shared memory": lambda: http.infer("sum", [tensor(httpclient, True)]),
        "gRPC raw": lambda: grpc.infer("sum", [tensor(grpcclient, False)]),
        "gRPC shared memory": lambda: grpc.infer("sum", [tensor(grpcclient, True)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=40, help="requests per way per round")
    args = parser.parse_args()
    data = np.random.default_rng(0).standard_normal(ELEMENTS).astype(np.float32)
    key = f"/naiad_bench_{os.getpid()}"
    region = shm.create_shared_memory_region("bench", key, data.nbytes)
    shm.set_shared_memory_region(region, [data])
    with tempfile.TemporaryDirectory() as folder:
        repository = ModelRepositoryBuilder(Path(folder) / "models")
        repository.add_model("sum", CONFIG, {"1/model.onnx": _sum_model()})
        server = start_server([repository.root])
        try:
            ways = _requests(server.http_url, server.grpc_url, data, key)
            latencies: dict[str, list[float]] = {name: [] for name in ways}
            for name, send in ways.items():  # warm up, and check every way gets the same answer
                assert np.isclose(send().as_numpy("Y")[0], data.sum(dtype=np.float64), rtol=1e-3), name
            for _ in range(args.rounds):
                for name, send in ways.items():
                    for _ in range(args.requests):
                        started = time.perf_counter()
                        send()
                        latencies[name].append((time.perf_counter() - started) * 1000)
        finally:
            server.stop()
            shm.destroy_shared_memory_region(region)
    medians = {name: statistics.median(values) for name, values in latencies.items()}
    rows = [[name, f"{medians[name]:.2f}", f"{np.percentile(latencies[name], 90):.2f}"] for name in ways]
    print_table("4 MiB FP32 input, one request at a time (ms)", ["way", "p50", "p90"], rows)
    for protocol, socket in (("HTTP", "HTTP binary"), ("gRPC", "gRPC raw")):
        ratio = medians[socket] / medians[f"{protocol} shared memory"]
        print(f"{protocol}: the socket's p50 is {ratio:.1f}x shared memory's")


if __name__ == "__main__":
    main()
