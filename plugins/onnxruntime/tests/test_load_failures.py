"""Broken ONNX models fail to load alone, with a reason that names the model and what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, start_server

from . import onnx_models
from .conftest import floats, write_model

_ADD_SUB_IO = """
input [ {{ name: "{input0}" data_type: {dtype} dims: [ {dim} ] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
"""

# model -> text its load failure must log
BROKEN = {
    "missing_file": "unable to find '",
    "corrupt_file": "onnx runtime error 7: Load model from",
    "wrong_name": "unexpected inference input 'SUMMAND', allowed inputs are: INPUT0, INPUT1",
    "wrong_dtype": "configuration expects datatype TYPE_FP16 for input 'INPUT0', model provides TYPE_FP32",
    "wrong_shape": "tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4])",
    "not_batchable": "model does not support batching while non-zero max_batch_size is specified",
    "sequence_output": "Unsupported ONNX Type 'ONNX_TYPE_SEQUENCE' for I/O 'SEQ'",
    "unknown_accelerator": "unknown Execution Accelerator 'turbo' is requested",
}
if "OpenVINOExecutionProvider" not in ort.get_available_providers():
    BROKEN["needs_openvino"] = "needs ONNX Runtime's OpenVINOExecutionProvider"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("broken") / "models"
    write_model(repo, "healthy", onnx_models.add_sub())
    (repo / "missing_file" / "1").mkdir(parents=True)
    (repo / "missing_file" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"')
    (repo / "corrupt_file" / "1").mkdir(parents=True)
    (repo / "corrupt_file" / "1" / "model.onnx").write_bytes(b"\x08\x07 not an onnx model")
    for name, input0, dtype, dim in (
        ("wrong_name", "SUMMAND", "TYPE_FP32", "4"),
        ("wrong_dtype", "INPUT0", "TYPE_FP16", "4"),
        ("wrong_shape", "INPUT0", "TYPE_FP32", "2, 2"),
    ):
        config = "max_batch_size: 4\n" + _ADD_SUB_IO.format(input0=input0, dtype=dtype, dim=dim)
        write_model(repo, name, onnx_models.add_sub(), config)
    write_model(repo, "not_batchable", onnx_models.int64_scale(), "max_batch_size: 8")
    write_model(repo, "sequence_output", onnx_models.sequence_output())
    accelerator = 'optimization {{ execution_accelerators {{ cpu_execution_accelerator [ {{ name: "{}" }} ] }} }}'
    write_model(repo, "unknown_accelerator", onnx_models.add_sub(), accelerator.format("turbo"))
    write_model(repo, "needs_openvino", onnx_models.add_sub(), accelerator.format("openvino"))
    process = start_server([repo])
    yield process
    process.stop()


def test_the_healthy_model_serves(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.is_model_ready("healthy")
    a, b = floats(2, 4), floats(2, 4, seed=1)
    tensors = [httpclient.InferInput(name, [2, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    np.testing.assert_allclose(client.infer("healthy", tensors).as_numpy("OUTPUT0"), a + b)


@pytest.mark.parametrize("model", sorted(BROKEN))
def test_a_broken_model_is_unavailable_with_its_reason(server: ServerProcess, model: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready(model)
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata(model)
    assert caught.value.status() == "404"
    assert caught.value.message() == f"Request for unknown model: '{model}' has no available versions"
    failures = [line for line in server.logs().splitlines() if f"model '{model}' version 1 failed to load" in line]
    assert failures, server.logs()
    assert BROKEN[model] in failures[0]


def test_naiad_check_suggests_the_tensor_a_misspelled_config_name_means(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    config = "max_batch_size: 4\n" + _ADD_SUB_IO.format(input0="INPTU0", dtype="TYPE_FP32", dim="4")
    write_model(repo, "misspelled", onnx_models.add_sub(), config)
    checked = subprocess.run(
        [sys.executable, "-m", "naiad", "check", str(repo), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 1, checked.stderr
    (problem,) = json.loads(checked.stdout)["problems"]
    assert problem["model"] == "misspelled"
    assert "unexpected inference input 'INPTU0', allowed inputs are: INPUT0, INPUT1" in problem["message"]
    assert problem["suggestion"] == "INPUT0"
    assert problem["fix"] == "replace 'INPTU0' with 'INPUT0'"
