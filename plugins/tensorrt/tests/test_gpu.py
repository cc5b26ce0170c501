"""Serving real TensorRT plans; these need a CUDA device and TensorRT (``pip install 'naiad-tensorrt[gpu]'``).

The plans are built from a tiny ONNX model with ``naiad-tensorrt build`` (two optimization
profiles over the batch and a variable width) and served by the real server.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.backend import gpu_count
from naiad.testing import ServerProcess, infer_through_shared_memory, start_server
from naiad_tensorrt.build import main as build_main

pytestmark = pytest.mark.skipif(gpu_count() == 0, reason="needs a CUDA device: TensorRT plans run only on NVIDIA GPUs")

# Two profiles over the batch and a variable width: batches 1-8 and 9-32, widths 1-16.
PROFILES = ["X=1x1:4x8:8x16,Y=1x1:4x8:8x16", "X=9x1:16x8:32x16,Y=9x1:16x8:32x16"]
MODELS = {
    "profiles": 'platform: "tensorrt_plan"\ninstance_group [ { kind: KIND_GPU profile: [ "0", "1" ] } ]',
    "graphs": (
        'backend: "tensorrt"\nmax_batch_size: 8\ninstance_group [ { kind: KIND_GPU count: 2 profile: [ "0" ] } ]\n'
        "optimization { cuda { graphs: true output_copy_stream: true graph_spec [ { batch_size: 4 input"
        ' { key: "X" value: { dim: [ 8 ] } } input { key: "Y" value: { dim: [ 8 ] } } } ] } }'
    ),
}


def _onnx(path: Path) -> None:
    """SUM = X + Y, DIFF = X - Y on FP32 ``[batch, width]``."""
    from onnx import TensorProto, helper, save_model

    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", "width"]) for name in "XY"]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", "width"]) for name in ("SUM", "DIFF")]
    nodes = [helper.make_node("Add", ["X", "Y"], ["SUM"]), helper.make_node("Sub", ["X", "Y"], ["DIFF"])]
    model = helper.make_model(
        helper.make_graph(nodes, "add_sub", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )
    save_model(model, str(path))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    if importlib.util.find_spec("tensorrt") is None:
        pytest.fail("this machine has a GPU but no TensorRT: pip install 'naiad-tensorrt[gpu]', then run these again")
    root = tmp_path_factory.mktemp("trt")
    onnx_path = root / "add_sub.onnx"
    _onnx(onnx_path)
    repo = root / "models"
    for name, config in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
        profiles = [arg for profile in PROFILES for arg in ("--profile", profile)]
        assert (
            build_main([str(onnx_path), "-o", str(repo / name / "1" / "model.plan"), *profiles, "--no-progress"]) == 0
        )
    process = start_server([repo], timeout=300)
    yield process
    process.stop()


def _floats(*shape: int, seed: int = 0) -> npt.NDArray[np.float32]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _infer(server: ServerProcess, model: str, x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> None:
    """The model's SUM and DIFF over HTTP and gRPC equal numpy's."""
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    for client, module in ((http, httpclient), (grpc, grpcclient)):
        tensors = [module.InferInput(name, list(x.shape), "FP32") for name in "XY"]
        tensors[0].set_data_from_numpy(x)
        tensors[1].set_data_from_numpy(y)
        result = client.infer(model, tensors)
        np.testing.assert_allclose(result.as_numpy("SUM"), x + y, rtol=1e-6)
        np.testing.assert_allclose(result.as_numpy("DIFF"), x - y, rtol=1e-6)


def test_the_config_is_completed_from_the_engine(server: ServerProcess) -> None:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("profiles")
    assert config["max_batch_size"] == 32  # the largest maximum batch of the profiles the instance group names
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("X", "TYPE_FP32", ["-1"]),
        ("Y", "TYPE_FP32", ["-1"]),
    ]
    assert [o["name"] for o in config["output"]] == ["SUM", "DIFF"]


def test_batches_run_on_the_profile_that_fits_them(server: ServerProcess) -> None:
    _infer(server, "profiles", _floats(3, 5), _floats(3, 5, seed=1))
    _infer(server, "profiles", _floats(8, 16), _floats(8, 16, seed=1))
    with pytest.raises(InferenceServerException) as caught:
        _infer(server, "profiles", _floats(2, 40), _floats(2, 40, seed=1))
    assert caught.value.status() == "400"
    assert "no optimization profile of this instance accepts the input shapes 'X' [2,40]" in str(caught.value)


def test_cuda_graphs_are_captured_and_used(server: ServerProcess) -> None:
    captured = [
        line
        for line in server.logs().splitlines()
        if "model 'graphs' instance" in line and "captured CUDA graph" in line
    ]
    assert len(captured) == 2, server.logs()  # one graph (batch 4, width 8) per instance
    _infer(server, "graphs", _floats(4, 8), _floats(4, 8, seed=1))  # the graph's shapes
    _infer(server, "graphs", _floats(2, 3), _floats(2, 3, seed=1))  # no graph for these


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_inputs_in_cuda_shared_memory_are_served(server: ServerProcess, protocol: str) -> None:
    x, y = _floats(2, 8), _floats(2, 8, seed=1)
    url = server.http_url if protocol == "http" else server.grpc_url
    written = infer_through_shared_memory(url, protocol, "profiles", {"X": x, "Y": y}, cuda_device=0)
    np.testing.assert_allclose(written["SUM"], x + y, rtol=1e-6)
    np.testing.assert_allclose(written["DIFF"], x - y, rtol=1e-6)
