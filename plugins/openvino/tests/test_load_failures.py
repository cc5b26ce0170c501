"""Broken models: each fails to load with a reason naming the model, the file and what is wrong,
while the good model next to them keeps serving."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .conftest import Sources, batch_of, infer_http, place
from .test_serving import ADD_MUL_CONFIG, ONNX_FILE

# model name -> pieces its load-failure reason must contain
EXPECTED: dict[str, tuple[str, ...]] = {
    "missing_file": ("unable to find '", "/missing_file/1/model.xml' for model 'missing_file'"),
    "missing_bin": ("model 'missing_bin': OpenVINO cannot read '", "/missing_bin/1/model.bin' is missing"),
    "corrupt_xml": (
        "model 'corrupt_xml': OpenVINO cannot read '",
        "/corrupt_xml/1/model.xml'",
        "Unable to read the model",
    ),
    "corrupt_onnx": ("model 'corrupt_onnx': OpenVINO cannot read '", "/corrupt_onnx/1/model.onnx'"),
    "wrong_input_name": (
        "model 'wrong_input_name': unexpected inference input 'INPUT9', allowed inputs are: INPUT0, INPUT1",
        "/wrong_input_name/1/model.xml'",
    ),
    "wrong_output_name": (
        "model 'wrong_output_name': unexpected inference output 'OUTPUT9', allowed outputs are: OUTPUT0, OUTPUT1",
        "/wrong_output_name/1/model.xml'",
    ),
    "wrong_datatype": (
        "model 'wrong_datatype': unsupported datatype TYPE_STRING for input 'INPUT0' (element type f32 in '",
        "/wrong_datatype/1/model.xml')",
    ),
    "wrong_dims": (
        "model 'wrong_dims', input 'INPUT1': the model expects 2 dimensions (shape [-1,4] in '",
        "/wrong_dims/1/model.xml') but the model configuration specifies 2 dimensions (an initial batch dimension "
        "because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,5])",
    ),
    "wrong_output_dims": (
        "model 'wrong_output_dims', output 'OUTPUT0': the model expects 2 dimensions (shape [-1,4] in '",
        "making complete shape [-1,2,2])",
    ),
    "wrong_rank_no_batch": (
        "model 'wrong_rank_no_batch', input 'INPUT0': the model expects 2 dimensions (shape [-1,4] in '",
        "but the model configuration specifies 3 dimensions (shape [2,4,1])",
    ),
    "input_count": ("unable to load model 'input_count', configuration expects 1 inputs, model provides 2",),
    "bad_parameter": (
        "model 'bad_parameter': expected the parameter 'NUM_STREAMS' to be either AUTO/NUMA/<int_value>, got many",
    ),
    "bad_hint": (
        "model 'bad_hint': expected the parameter 'PERFORMANCE_HINT' to be LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT",
    ),
    "bad_extension": ("model 'bad_extension': cannot load CPU_EXTENSION_PATH '/nonexistent/libcustom.so'",),
}


@pytest.fixture(scope="module")
def server(sources: Sources, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("broken") / "models")
    place(repository, "good", ADD_MUL_CONFIG, sources.add_mul_xml)
    repository.add_model("missing_file", ADD_MUL_CONFIG, {"1/.keep": ""})
    model_dir = place(repository, "missing_bin", ADD_MUL_CONFIG, sources.add_mul_xml)
    (model_dir / "1" / "model.bin").unlink()
    repository.add_model("corrupt_xml", ADD_MUL_CONFIG, {"1/model.xml": "<net name='x'><layers>", "1/model.bin": b""})
    repository.add_model("corrupt_onnx", ADD_MUL_CONFIG + ONNX_FILE, {"1/model.onnx": b"\x08\x01garbage"})
    place(repository, "wrong_input_name", ADD_MUL_CONFIG.replace('"INPUT1"', '"INPUT9"'), sources.add_mul_xml)
    place(repository, "wrong_output_name", ADD_MUL_CONFIG.replace('"OUTPUT1"', '"OUTPUT9"'), sources.add_mul_xml)
    wrong_type = ADD_MUL_CONFIG.replace('"INPUT0" data_type: TYPE_FP32', '"INPUT0" data_type: TYPE_STRING')
    place(repository, "wrong_datatype", wrong_type, sources.add_mul_xml)
    wrong_dims = ADD_MUL_CONFIG.replace(
        '"INPUT1" data_type: TYPE_FP32 dims: [ 4 ]', '"INPUT1" data_type: TYPE_FP32 dims: [ 5 ]'
    )
    place(repository, "wrong_dims", wrong_dims, sources.add_mul_xml)
    wrong_output = ADD_MUL_CONFIG.replace(
        '"OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ]', '"OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ]'
    )
    place(repository, "wrong_output_dims", wrong_output, sources.add_mul_xml)
    # Full-shape dims of the wrong rank: auto-complete cannot make this a batching model.
    wrong_rank = ADD_MUL_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0").replace(
        '"INPUT0" data_type: TYPE_FP32 dims: [ 4 ]', '"INPUT0" data_type: TYPE_FP32 dims: [ 2, 4, 1 ]'
    )
    place(repository, "wrong_rank_no_batch", wrong_rank, sources.add_mul_xml)
    one_input = ADD_MUL_CONFIG.replace('  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }\n', "").replace(
        "[ 4 ] },\n]", "[ 4 ] }\n]"
    )
    place(repository, "input_count", one_input, sources.add_mul_xml)
    place(repository, "bad_parameter", ADD_MUL_CONFIG + _param("NUM_STREAMS", "many"), sources.add_mul_xml)
    place(repository, "bad_hint", ADD_MUL_CONFIG + _param("PERFORMANCE_HINT", "fastest"), sources.add_mul_xml)
    extension = _param("CPU_EXTENSION_PATH", "/nonexistent/libcustom.so")
    place(repository, "bad_extension", ADD_MUL_CONFIG + extension, sources.add_mul_xml)
    process = start_server([repository.root])
    yield process
    process.stop()


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def _reason(logs: str, model: str) -> str:
    match = re.search(rf"model '{model}' version 1 failed to load: (.*)", logs)
    assert match, f"no load failure logged for {model}:\n{logs}"
    return match.group(1)


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_broken_model_is_unavailable_with_its_reason(server: ServerProcess, model: str) -> None:
    with pytest.raises(InferenceServerException) as raised:
        httpclient.InferenceServerClient(server.http_url).get_model_metadata(model)
    assert "has no available versions" in str(raised.value)
    assert raised.value.status() == "404"
    with pytest.raises(InferenceServerException) as raised_grpc:
        grpcclient.InferenceServerClient(server.grpc_url).get_model_metadata(model)
    assert "has no available versions" in str(raised_grpc.value)
    reason = _reason(server.logs(), model)
    for piece in EXPECTED[model]:
        assert piece in reason


def test_the_good_model_still_serves(server: ServerProcess) -> None:
    inputs = batch_of(2)
    result = infer_http(server.http_url, "good", inputs, ["OUTPUT0"])
    assert result["OUTPUT0"].shape == (2, 4)
