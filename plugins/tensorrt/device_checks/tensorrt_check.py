"""Device check of naiad-tensorrt on a CUDA machine (run by tensorrt.sh; prints PASS/FAIL/INFO lines).

1. Builds a plan with ``naiad-tensorrt build`` (two optimization profiles, progress bar) from the
   onnxruntime plugin's example ONNX model (add_sub, FP32 [batch, 4]).
2. Serves it with naiad next to the same ONNX model on onnxruntime, with CUDA graphs and an output
   copy stream, and compares the plan's HTTP and gRPC results with onnxruntime's on the same inputs
   for batches that only profile 0 or only profile 1 accepts.
3. Checks that CUDA graphs were captured for Triton's batch sizes and that a shape outside every
   profile is a 400 naming the profiles.
4. Measures, as benchmarks/backends.py does, served throughput (gRPC, 16 concurrent clients, dynamic
   batching to 8) over the engine's own in-process throughput at batch 8, on a ~1 ms MLP plan.

Exits non-zero after any FAIL.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[3]
BATCH = 8
CONCURRENCY = 16
SECONDS = 10.0
FEATURES = 768
failures: list[str] = []


def report(ok: bool, what: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def onnx_example() -> bytes:
    """The onnxruntime plugin's example model, from its own script."""
    path = ROOT / "plugins" / "onnxruntime" / "examples" / "make_example.py"
    spec = importlib.util.spec_from_file_location("make_example", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model: bytes = module.build_model()
    return model


def mlp_onnx(path: Path) -> None:
    """Three 768x768 MatMul+Relu layers on FP32 [batch, 768] (about a millisecond at batch 8 on a CPU)."""
    from onnx import TensorProto, helper, numpy_helper, save_model

    rng = np.random.default_rng(0)
    nodes, weights, previous = [], [], "x"
    for index in range(3):
        weights.append(
            numpy_helper.from_array((rng.standard_normal((768, 768)) * 0.05).astype(np.float32), f"w{index}")
        )
        out = "y" if index == 2 else f"r{index}"
        nodes += [
            helper.make_node("MatMul", [previous, f"w{index}"], [f"m{index}"]),
            helper.make_node("Relu", [f"m{index}"], [out]),
        ]
        previous = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", FEATURES])],
        weights,
    )
    save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def build(onnx_path: Path, plan: Path, *profiles: str) -> None:
    command = [sys.executable, "-m", "naiad_tensorrt.build", str(onnx_path), "-o", str(plan)]
    for profile in profiles:
        command += ["--profile", profile]
    print("INFO", " ".join(command), flush=True)
    done = subprocess.run(command, check=False)
    report(
        done.returncode == 0 and plan.is_file(),
        f"naiad-tensorrt build wrote {plan.name} ({plan.stat().st_size if plan.is_file() else 0} bytes)",
    )


def compare(server: Any, session: Any, batch: int, profile: int) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    rng = np.random.default_rng(batch)
    a, b = (rng.standard_normal((batch, 4)).astype(np.float32) for _ in range(2))
    expected = dict(
        zip(("OUTPUT0", "OUTPUT1"), session.run(["OUTPUT0", "OUTPUT1"], {"INPUT0": a, "INPUT1": b}), strict=True)
    )
    for protocol, module, url in (("HTTP", httpclient, server.http_url), ("gRPC", grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url)
        tensors = [module.InferInput(name, [batch, 4], "FP32") for name in ("INPUT0", "INPUT1")]
        tensors[0].set_data_from_numpy(a)
        tensors[1].set_data_from_numpy(b)
        result = client.infer("add_sub_trt", tensors)
        same = all(np.allclose(result.as_numpy(name), value, rtol=1e-5, atol=1e-6) for name, value in expected.items())
        report(same, f"{protocol} batch {batch} (only profile {profile} fits) equals onnxruntime's outputs")


def served_throughput(url: str) -> float:
    """Inferences/s of CONCURRENCY gRPC clients sending batch-1 requests for SECONDS."""
    import tritonclient.grpc as grpcclient

    counts = [0] * CONCURRENCY
    stop = time.monotonic() + SECONDS

    def client(index: int) -> None:
        connection = grpcclient.InferenceServerClient(url)
        tensor = grpcclient.InferInput("x", [1, FEATURES], "FP32")
        tensor.set_data_from_numpy(np.ones((1, FEATURES), dtype=np.float32))
        while time.monotonic() < stop:
            connection.infer("mlp_trt", [tensor])
            counts[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / SECONDS


def in_process_throughput(model_dir: Path) -> float:
    """Rows/s of the instance's engine call alone at batch 8, in this process."""
    from naiad.testing import load_model

    batch: npt.NDArray[np.float32] = np.ones((BATCH, FEATURES), dtype=np.float32)
    with load_model(model_dir, gpu_count=1) as model:
        instance: Any = model.instances[0]
        for _ in range(20):
            instance.run({"x": batch})
        runs, started = 0, time.monotonic()
        while time.monotonic() - started < SECONDS:
            instance.run({"x": batch})
            runs += 1
        return runs * BATCH / (time.monotonic() - started)


def main() -> int:
    import onnxruntime
    import tensorrt
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    from naiad.testing import start_server

    print(f"INFO TensorRT {tensorrt.__version__}, onnxruntime {onnxruntime.__version__}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="naiad-trt-check-"))
    onnx_path = work / "add_sub.onnx"
    onnx_path.write_bytes(onnx_example())
    repo = work / "models"
    (repo / "add_sub_trt" / "1").mkdir(parents=True)
    (repo / "add_sub_trt" / "config.pbtxt").write_text(
        'platform: "tensorrt_plan"\n'
        'instance_group [ { kind: KIND_GPU count: 1 profile: [ "0", "1" ] } ]\n'
        "optimization { cuda { graphs: true output_copy_stream: true } }\n"
    )
    build(
        onnx_path,
        repo / "add_sub_trt" / "1" / "model.plan",
        "INPUT0=1x4:4x4:8x4,INPUT1=1x4:4x4:8x4",
        "INPUT0=9x4:16x4:32x4,INPUT1=9x4:16x4:32x4",
    )
    (repo / "add_sub_onnx" / "1").mkdir(parents=True)
    (repo / "add_sub_onnx" / "1" / "model.onnx").write_bytes(onnx_path.read_bytes())
    (repo / "add_sub_onnx" / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 32\n')
    mlp_dir = repo / "mlp_trt"
    (mlp_dir / "1").mkdir(parents=True)
    mlp_onnx(work / "mlp.onnx")
    build(work / "mlp.onnx", mlp_dir / "1" / "model.plan", f"x=1x{FEATURES}:{BATCH}x{FEATURES}:{BATCH}x{FEATURES}")
    (mlp_dir / "config.pbtxt").write_text(
        f'platform: "tensorrt_plan"\nmax_batch_size: {BATCH}\ndynamic_batching {{ }}\n'
        "instance_group [ { kind: KIND_GPU count: 1 } ]\n"
    )

    server = start_server([repo], timeout=600)
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        for model in ("add_sub_trt", "add_sub_onnx", "mlp_trt"):
            report(client.is_model_ready(model), f"model {model} is READY")
        config = client.get_model_config("add_sub_trt")
        print(f"INFO auto-completed add_sub_trt: max_batch_size {config.get('max_batch_size')}", flush=True)
        report(config.get("max_batch_size") == 32, "max_batch_size completed from the profiles (32)")
        session = onnxruntime.InferenceSession(onnx_path.read_bytes(), providers=["CPUExecutionProvider"])
        for batch, profile in ((1, 0), (4, 0), (8, 0), (12, 1), (32, 1)):
            compare(server, session, batch, profile)
        graphs = [
            line
            for line in server.logs().splitlines()
            if "model 'add_sub_trt'" in line and "captured CUDA graph" in line
        ]
        print("INFO " + "\nINFO ".join(graphs))
        # Triton's batch sizes up to 32: 1, 2, 3, 4, 6, 8 on profile 0; 12, 16, 32 on profile 1.
        report(
            len(graphs) == 9,
            f"CUDA graphs captured for Triton's batch sizes on the profile that fits each ({len(graphs)} of 9)",
        )
        tensor = httpclient.InferInput("INPUT0", [2, 5], "FP32")
        tensor.set_data_from_numpy(np.ones((2, 5), dtype=np.float32))
        other = httpclient.InferInput("INPUT1", [2, 5], "FP32")
        other.set_data_from_numpy(np.ones((2, 5), dtype=np.float32))
        try:
            client.infer("add_sub_trt", [tensor, other])
            report(False, "a shape the config refuses is refused")
        except InferenceServerException as error:
            report(error.status() == "400", f"a wrong shape is a 400: {error.message()}")
        served = served_throughput(server.grpc_url)
    finally:
        server.stop()
    alone = in_process_throughput(mlp_dir)
    ratio = served / alone if alone else 0.0
    print(
        f"INFO mlp_trt served {served:.0f} infer/s (gRPC, concurrency {CONCURRENCY}) / in-process {alone:.0f} rows/s"
        f" at batch {BATCH} = {ratio:.2f} (target >= 0.7)"
    )
    print(f"{'PASS' if ratio >= 0.7 else 'WARN'} served over in-process throughput {ratio:.2f}", flush=True)
    print(f"{'FAIL' if failures else 'PASS'} {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
