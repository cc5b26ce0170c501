"""What pipelines cost: an ensemble against the client chaining the calls, and one more step or BLS call.

One naiad server serves, from one repository:

* ``step``: the built-in ``identity`` model (FP32 [16]), the cheapest model there is;
* ``chain_1``, ``chain_2``, ``chain_4``: ensembles of 1, 2 and 4 ``step`` models in a row;
* ``bls_0`` and ``bls_4``: python models that return their input after 0 and 4 BLS calls to ``step``.

Three measurements, each a median over rounds in which every variant is measured in turn (so load
changes on a shared machine hit them alike), at concurrency 1 with tritonclient:

1. ``chain_2`` against the client calling ``step`` twice, one call after the other (HTTP and gRPC):
   the ensemble saves a round trip, so it should be faster;
2. the cost of one more ensemble step inside the server: (``chain_4`` - ``chain_1``) / 3;
3. the cost of one BLS call inside the server: (``bls_4`` - ``bls_0``) / 4.

    python benchmarks/pipelines.py [--rounds 5] [--requests 400]

Target: one more ensemble step or BLS call costs under 50 µs of server time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from harness import print_table

from naiad.testing import ModelRepositoryBuilder, start_server

VECTOR = np.arange(16, dtype=np.float32)

STEP = """
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""

BLS = """
import numpy as np
import triton_python_backend_utils as pb_utils

CALLS = {calls}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            for _ in range(CALLS):
                called = pb_utils.InferenceRequest(
                    model_name="step", inputs=[tensor], requested_output_names=["OUTPUT0"]
                ).exec()
                if called.has_error():
                    raise pb_utils.TritonModelException(called.error().message())
                tensor = pb_utils.Tensor("INPUT0", pb_utils.get_output_tensor_by_name(called, "OUTPUT0").as_numpy())
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
"""


def _chain(steps: int) -> str:
    tensors = ["INPUT0", *(f"t{index}" for index in range(1, steps)), "OUTPUT0"]
    listed = ", ".join(
        f'{{ model_name: "step" model_version: -1 input_map {{ key: "INPUT0" value: "{tensors[i]}" }} '
        f'output_map {{ key: "OUTPUT0" value: "{tensors[i + 1]}" }} }}'
        for i in range(steps)
    )
    return (
        'platform: "ensemble"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        f"ensemble_scheduling {{ step [ {listed} ] }}\n"
    )


def build_repository(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    builder.add_model("step", STEP, {"1/.keep": ""})
    for steps in (1, 2, 4):
        builder.add_model(f"chain_{steps}", _chain(steps), {"1/.keep": ""})
    for calls in (0, 4):
        builder.add_python_model(f"bls_{calls}", BLS.format(calls=calls), STEP.replace('"identity"', '"python"'))
    return builder.root


def _median_latency_us(call: Callable[[], object], requests: int) -> float:
    for _ in range(20):
        call()
    latencies = []
    for _ in range(requests):
        started = time.perf_counter_ns()
        call()
        latencies.append((time.perf_counter_ns() - started) / 1e3)
    return statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server([build_repository(Path(folder) / "models")], timeout=120)
        try:
            http = httpclient.InferenceServerClient(server.http_url)
            grpc = grpcclient.InferenceServerClient(server.grpc_url)
            http_input = httpclient.InferInput("INPUT0", [16], "FP32")
            http_input.set_data_from_numpy(VECTOR)
            grpc_input = grpcclient.InferInput("INPUT0", [16], "FP32")
            grpc_input.set_data_from_numpy(VECTOR)

            def http_call(model: str) -> Callable[[], object]:
                return lambda: http.infer(model, [http_input])

            def grpc_call(model: str) -> Callable[[], object]:
                return lambda: grpc.infer(model, [grpc_input])

            def twice(call: Callable[[], object]) -> Callable[[], object]:
                return lambda: (call(), call())

            variants: dict[str, Callable[[], object]] = {
                "http chain_2": http_call("chain_2"),
                "http step, step": twice(http_call("step")),
                "grpc chain_2": grpc_call("chain_2"),
                "grpc step, step": twice(grpc_call("step")),
                "grpc chain_1": grpc_call("chain_1"),
                "grpc chain_4": grpc_call("chain_4"),
                "grpc bls_0": grpc_call("bls_0"),
                "grpc bls_4": grpc_call("bls_4"),
            }
            results: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(arguments.rounds):
                for name, call in variants.items():
                    results[name].append(_median_latency_us(call, arguments.requests))
            http.close()
            grpc.close()
        finally:
            server.stop()
    median = {name: statistics.median(values) for name, values in results.items()}
    print_table(
        f"p50 latency at concurrency 1, µs (median of {arguments.rounds} rounds)",
        ["variant", "p50 µs"],
        list(median.items()),
    )
    rows = []
    for protocol in ("http", "grpc"):
        ensemble, chained = median[f"{protocol} chain_2"], median[f"{protocol} step, step"]
        rows.append((protocol, ensemble, chained, chained / ensemble))
    print_table(
        "two steps: ensemble against the client chaining the calls",
        ["protocol", "ensemble µs", "client chain µs", "chain / ensemble"],
        rows,
    )
    step_cost = (median["grpc chain_4"] - median["grpc chain_1"]) / 3
    bls_cost = (median["grpc bls_4"] - median["grpc bls_0"]) / 4
    print_table(
        "server time of one more ensemble step and of one BLS call (target < 50 µs)",
        ["what", "µs"],
        [("one more ensemble step", step_cost), ("one BLS call", bls_cost)],
    )


if __name__ == "__main__":
    main()
