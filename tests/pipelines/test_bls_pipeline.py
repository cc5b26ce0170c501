"""A python model calling an onnxruntime model and a decoupled python model through BLS, end to end.

``pipeline`` scales its numbers with the ONNX model ``scale`` while the decoupled ``word_stream``
splits its text, both awaited at once from ``async def execute``; ``pipeline_stream`` is itself
decoupled and streams one response per word, each scored by ``scale``; ``add_and_count`` is the
example model of docs/pipelines.md, taken from the page. Triton's HTTP and gRPC clients drive them
on one real server.
"""

from __future__ import annotations

import queue
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper

from naiad.testing import ModelRepositoryBuilder, ThreadedServer, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"

SCALE_CONFIG = """
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

PIPELINE = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            scaled = pb_utils.InferenceRequest(
                model_name="scale",
                inputs=[pb_utils.Tensor("X", pb_utils.get_input_tensor_by_name(request, "NUMBERS").as_numpy())],
                requested_output_names=["Y"],
            ).async_exec()
            words = pb_utils.InferenceRequest(
                model_name="word_stream",
                inputs=[pb_utils.Tensor("text_input", pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy())],
                requested_output_names=["text_output"],
            ).async_exec(decoupled=True)
            scaled, words = await asyncio.gather(scaled, words)
            if scaled.has_error():
                responses.append(pb_utils.InferenceResponse(error=scaled.error()))
                continue
            collected = [r.output_tensors()[0].as_numpy()[0] async for r in words if r.output_tensors()]
            y = pb_utils.get_output_tensor_by_name(scaled, "Y")
            responses.append(
                pb_utils.InferenceResponse([
                    pb_utils.Tensor("SCALED", y.as_numpy()),
                    pb_utils.Tensor("WORDS", np.array(collected, dtype=np.object_)),
                ])
            )
        return responses
"""

PIPELINE_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "NUMBERS" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "SCALED" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "WORDS" data_type: TYPE_STRING dims: [ -1 ] } ]
"""

PIPELINE_STREAM = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "TEXT")
            words = pb_utils.InferenceRequest(
                model_name="word_stream", inputs=[pb_utils.Tensor("text_input", text.as_numpy())],
                requested_output_names=["text_output"],
            ).exec(decoupled=True)
            for response in words:
                if response.has_error():
                    sender.send(pb_utils.InferenceResponse(error=response.error()))
                    continue
                if not response.output_tensors():
                    continue
                word = response.output_tensors()[0]
                length = np.array([len(word.as_numpy()[0])], np.float32)
                score = pb_utils.InferenceRequest(
                    model_name="scale", inputs=[pb_utils.Tensor("X", length)], requested_output_names=["Y"]
                ).exec()
                scored = pb_utils.Tensor("SCORE", score.output_tensors()[0].as_numpy())
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("WORD", word.as_numpy()), scored]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

PIPELINE_STREAM_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "WORD" data_type: TYPE_STRING dims: [ 1 ] }, { name: "SCORE" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def scale_model() -> bytes:
    """Y = 2 * X + 1 as an ONNX graph."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "TWO"], ["X2"]), helper.make_node("Add", ["X2", "ONE"], ["Y"])],
        "scale",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n"])],
        initializer=[
            numpy_helper.from_array(np.array(2, np.float32), "TWO"),
            numpy_helper.from_array(np.array(1, np.float32), "ONE"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def documented_model() -> tuple[str, str]:
    """The config and model.py of the BLS example in docs/pipelines.md."""
    page = (ROOT / "docs" / "pipelines.md").read_text()
    section = page.split("## BLS: python models calling models", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    config = next(text for language, text in blocks if language == "protobuf")
    model_py = next(text for language, text in blocks if language == "python" and "TritonPythonModel" in text)
    return config, model_py


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("bls_pipeline") / "models")
    builder.add_model("scale", SCALE_CONFIG, {"1/model.onnx": scale_model()})
    word_stream = EXAMPLES / "word_stream"
    builder.add_model(
        "word_stream",
        (word_stream / "config.pbtxt").read_text().replace('"0.05"', '"0.01"'),
        {"1/model.py": (word_stream / "1" / "model.py").read_text()},
    )
    builder.add_python_model("pipeline", PIPELINE, PIPELINE_CONFIG)
    builder.add_python_model("pipeline_stream", PIPELINE_STREAM, PIPELINE_STREAM_CONFIG)
    add_sub = EXAMPLES / "add_sub"
    builder.add_model(
        "add_sub", (add_sub / "config.pbtxt").read_text(), {"1/model.py": (add_sub / "1" / "model.py").read_text()}
    )
    config, model_py = documented_model()
    builder.add_python_model("add_and_count", model_py, config)
    with serve_in_thread([builder.root]) as running:
        yield running


def _inputs(module: Any, numbers: list[float], text: str) -> list[Any]:
    values = module.InferInput("NUMBERS", [len(numbers)], "FP32")
    values.set_data_from_numpy(np.array(numbers, np.float32))
    words = module.InferInput("TEXT", [1], "BYTES")
    words.set_data_from_numpy(np.array([text.encode()], np.object_))
    return [values, words]


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_python_model_calls_onnxruntime_and_a_decoupled_model(server: ThreadedServer, module: Any) -> None:
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    try:
        result = client.infer("pipeline", _inputs(module, [0.0, 1.5, -2.0], "the quick brown fox"))
        np.testing.assert_array_equal(result.as_numpy("SCALED"), [1.0, 4.0, -3.0])
        assert result.as_numpy("WORDS").tolist() == [b"the", b"quick", b"brown", b"fox"]
    finally:
        client.close()


def test_a_decoupled_python_model_streams_what_its_bls_calls_return(server: ThreadedServer) -> None:
    results: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put(error or result))
    try:
        text = grpcclient.InferInput("TEXT", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"a bb ccc"], np.object_))
        client.async_stream_infer("pipeline_stream", [text], enable_empty_final_response=True)
        streamed = []
        while not (result := results.get(timeout=10)).get_response().parameters["triton_final_response"].bool_param:
            streamed.append((result.as_numpy("WORD")[0], float(result.as_numpy("SCORE")[0])))
        assert streamed == [(b"a", 3.0), (b"bb", 5.0), (b"ccc", 7.0)]
    finally:
        client.stop_stream()
        client.close()


def test_the_bls_calls_count_in_the_callees_statistics(server: ThreadedServer) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:

        def successes(model: str) -> int:
            stats = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
            return int(stats["success"]["count"])

        before = {model: successes(model) for model in ("scale", "word_stream", "pipeline")}
        for _ in range(2):
            client.infer("pipeline", _inputs(httpclient, [1.0], "one two"))
        deadline = time.monotonic() + 10
        while successes("word_stream") < before["word_stream"] + 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert {model: successes(model) - count for model, count in before.items()} == {
            "scale": 2,
            "word_stream": 2,
            "pipeline": 2,
        }
    finally:
        client.close()


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_the_documented_bls_model_runs(server: ThreadedServer, module: Any) -> None:
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    try:
        a, b = np.arange(4, dtype=np.float32), np.full(4, 10, np.float32)
        inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        text = module.InferInput("TEXT", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"the quick brown fox"], np.object_))
        result = client.infer("add_and_count", [*inputs, text])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        assert result.as_numpy("WORDS").tolist() == [4]
    finally:
        client.close()
