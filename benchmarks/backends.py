"""Served throughput of each framework backend over its engine's own in-process throughput.

For every backend this builds one model whose batch-8 execution costs about a millisecond,
measures the engine alone on batch-8 inputs in this process, then serves the same model from
naiad (dynamic batching, max_batch_size 8) and measures it with perf_analyzer at concurrency 16
over binary HTTP and gRPC, all in one run:

    python benchmarks/backends.py [--backends onnxruntime pytorch openvino fil] [--repeats 3]

ratio = served inferences/s / in-process rows/s at batch 8 (target >= 0.7).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from harness import measure, median_of, print_table

from naiad.testing import ModelRepositoryBuilder, start_server

FEATURES = 768
HIDDEN = 768
LAYERS = 3
BATCH = 8
CONCURRENCY = 16

Engine = Callable[[np.ndarray], Any]


def _weights() -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    return [
        generator.standard_normal((HIDDEN if i else FEATURES, HIDDEN)).astype(np.float32) * 0.05 for i in range(LAYERS)
    ]


def _config(backend_line: str, input_name: str, output_name: str, extra: str = "") -> str:
    return f"""
        {backend_line}
        max_batch_size: {BATCH}
        input [ {{ name: "{input_name}" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
        output [ {{ name: "{output_name}" data_type: TYPE_FP32 dims: [ {HIDDEN} ] }} ]
        dynamic_batching {{ }}
        instance_group [ {{ kind: KIND_CPU count: 1 }} ]
        {extra}
    """


def _onnx_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, previous = [], [], "x"
    for index, weight in enumerate(_weights()):
        initializers.append(numpy_helper.from_array(weight, f"w{index}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{index}"], [f"m{index}"]))
        out = "y" if index == LAYERS - 1 else f"r{index}"
        nodes.append(helper.make_node("Relu", [f"m{index}"], [out]))
        previous = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def onnxruntime_case(builder: ModelRepositoryBuilder) -> tuple[str, Engine]:
    import onnxruntime

    path = builder.root / "bench_onnxruntime" / "1" / "model.onnx"
    _onnx_model(path)
    builder.add_model("bench_onnxruntime", _config('platform: "onnxruntime_onnx"', "x", "y"))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return "bench_onnxruntime", lambda batch: session.run(None, {"x": batch})


def openvino_case(builder: ModelRepositoryBuilder) -> tuple[str, Engine]:
    import openvino

    onnx_path = builder.root / "bench_openvino_src" / "model.onnx"
    _onnx_model(onnx_path)
    target = builder.root / "bench_openvino" / "1"
    target.mkdir(parents=True, exist_ok=True)
    openvino.save_model(openvino.convert_model(str(onnx_path)), str(target / "model.xml"), compress_to_fp16=False)
    (onnx_path).unlink()
    onnx_path.parent.rmdir()
    builder.add_model("bench_openvino", _config('backend: "openvino"', "x", "y"))
    compiled = openvino.Core().compile_model(str(target / "model.xml"), "CPU")
    request = compiled.create_infer_request()
    return "bench_openvino", lambda batch: request.infer({0: batch})


def pytorch_case(builder: ModelRepositoryBuilder) -> tuple[str, Engine]:
    import torch

    class Mlp(torch.nn.Module):
        def __init__(self, weights: list[np.ndarray]) -> None:
            super().__init__()
            self.weights = torch.nn.ParameterList([torch.nn.Parameter(torch.from_numpy(w)) for w in weights])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for weight in self.weights:
                x = torch.relu(x @ weight)
            return x

    module = torch.jit.script(Mlp(_weights()).eval())
    path = builder.root / "bench_pytorch" / "1" / "model.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    module.save(str(path))
    builder.add_model("bench_pytorch", _config('platform: "pytorch_libtorch"', "INPUT__0", "OUTPUT__0"))

    def run(batch: np.ndarray) -> Any:
        with torch.inference_mode():
            return module(torch.from_numpy(batch)).numpy()

    return "bench_pytorch", run


def fil_case(builder: ModelRepositoryBuilder) -> tuple[str, Engine]:
    import xgboost

    generator = np.random.default_rng(0)
    features = generator.standard_normal((2000, FEATURES)).astype(np.float32)
    labels = (features[:, :8].sum(axis=1) > 0).astype(np.float32)
    booster = xgboost.train(
        {"objective": "binary:logistic", "max_depth": 8, "nthread": 1},
        xgboost.DMatrix(features, label=labels),
        num_boost_round=300,
    )
    path = builder.root / "bench_fil" / "1" / "xgboost.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(path))
    builder.add_model(
        "bench_fil",
        f"""
        backend: "fil"
        max_batch_size: {BATCH}
        input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
        output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        dynamic_batching {{ }}
        instance_group [ {{ kind: KIND_CPU count: 1 }} ]
        parameters {{ key: "model_type" value: {{ string_value: "xgboost_json" }} }}
        parameters {{ key: "is_classifier" value: {{ string_value: "true" }} }}
        parameters {{ key: "predict_proba" value: {{ string_value: "true" }} }}
        """,
    )
    return "bench_fil", lambda batch: booster.inplace_predict(batch)


CASES: dict[str, Callable[[ModelRepositoryBuilder], tuple[str, Engine]]] = {
    "onnxruntime": onnxruntime_case,
    "pytorch": pytorch_case,
    "openvino": openvino_case,
    "fil": fil_case,
}


def in_process_rows_per_second(engine: Engine, seconds: float = 2.0) -> tuple[float, float]:
    """Rows per second of the engine alone on batch-8 inputs, and the median batch time in ms."""
    batch = np.random.default_rng(1).standard_normal((BATCH, FEATURES)).astype(np.float32)
    for _ in range(20):
        engine(batch)
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        began = time.perf_counter()
        engine(batch)
        times.append(time.perf_counter() - began)
    return BATCH * len(times) / sum(times), statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        builder = ModelRepositoryBuilder(Path(folder) / "models")
        engines = {backend: CASES[backend](builder) for backend in args.backends}
        baseline = {backend: in_process_rows_per_second(engine) for backend, (_, engine) in engines.items()}
        server = start_server([builder.root])
        try:
            for backend, (model, _) in engines.items():
                rows_per_second, batch_ms = baseline[backend]
                for protocol in ("http", "grpc"):
                    url = server.http_url if protocol == "http" else server.grpc_url
                    served = median_of([measure(model, url, protocol, CONCURRENCY) for _ in range(args.repeats)])
                    rows.append(
                        [
                            backend,
                            protocol,
                            batch_ms,
                            rows_per_second,
                            served.throughput,
                            served.throughput / rows_per_second,
                        ]
                    )
        finally:
            server.stop()
    print_table(
        f"served (concurrency {CONCURRENCY}, dynamic batching, binary) over in-process (batch {BATCH}), "
        f"median of {args.repeats}",
        ["backend", "proto", "batch-8 ms", "in-process rows/s", "served infer/s", "ratio"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
