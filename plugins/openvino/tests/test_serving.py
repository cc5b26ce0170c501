"""Serving through the real server: tritonclient.http and tritonclient.grpc answers compared
with OpenVINO's own in-process result, for IR and ONNX files, with and without config.pbtxt."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, infer_through_shared_memory, start_server

from . import models
from .conftest import PROTOCOLS, Sources, batch_of, infer_http, place

ADD_MUL_CONFIG = """
backend: "openvino"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""
ONNX_FILE = 'default_model_filename: "model.onnx"\n'
DYNAMIC = "dynamic_batching { max_queue_delay_microseconds: 50000 }\n"
TWO_INSTANCES = "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
OUTPUTS = ("OUTPUT0", "OUTPUT1")


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


@pytest.fixture(scope="module")
def server(sources: Sources, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for every model of this module (server starts are the slow part)."""
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("serving") / "models")
    place(repository, "ir_config", ADD_MUL_CONFIG, sources.add_mul_xml)
    place(repository, "ir_auto", None, sources.add_mul_xml)
    place(repository, "onnx_config", ADD_MUL_CONFIG + ONNX_FILE, sources.add_mul_onnx)
    place(repository, "onnx_auto", 'backend: "openvino"\n' + ONNX_FILE, sources.add_mul_onnx)
    place(repository, "ir_dynamic", ADD_MUL_CONFIG + DYNAMIC, sources.add_mul_xml)
    place(repository, "ir_two", ADD_MUL_CONFIG + DYNAMIC + TWO_INSTANCES, sources.add_mul_xml)
    place(repository, "ir_varlen", None, sources.varlen_xml)
    place(repository, "ir_int", None, sources.int_xml)
    place(repository, "ir_static_batch1", ADD_MUL_CONFIG, sources.static_xml)
    skip = _param("SKIP_OV_DYNAMIC_BATCHSIZE", "YES")
    place(repository, "ir_skip", ADD_MUL_CONFIG.replace("8", "4") + skip, sources.add_mul_xml)
    padding = skip + _param("ENABLE_BATCH_PADDING", "yes")
    place(repository, "ir_skip_pad", ADD_MUL_CONFIG.replace("8", "4") + padding, sources.add_mul_xml)
    converted = ADD_MUL_CONFIG.replace('"INPUT0" data_type: TYPE_FP32', '"INPUT0" data_type: TYPE_FP16')
    converted = converted.replace('"OUTPUT1" data_type: TYPE_FP32', '"OUTPUT1" data_type: TYPE_FP64')
    place(repository, "ir_convert", converted, sources.add_mul_xml)
    reshape_io = ADD_MUL_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0").replace("[ 4 ]", "[ -1, 4 ]")
    place(repository, "ir_reshape_io", reshape_io + _param("RESHAPE_IO_LAYERS", "YES"), sources.static_xml)
    tuned = "".join(
        _param(key, value)
        for key, value in (
            ("PERFORMANCE_HINT", "THROUGHPUT"),
            ("NUM_STREAMS", "1"),
            ("INFERENCE_NUM_THREADS", "1"),
            ("COMPILATION_NUM_THREADS", "1"),
        )
    )
    place(repository, "ir_tuned", ADD_MUL_CONFIG + tuned, sources.add_mul_xml)
    process = start_server([repository.root])
    yield process
    process.stop()


def _check(result: dict[str, npt.NDArray[Any]], expected: dict[str, npt.NDArray[Any]]) -> None:
    for name, want in expected.items():
        np.testing.assert_allclose(result[name], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["ir_config", "ir_auto", "onnx_config", "onnx_auto", "ir_tuned"])
def test_add_mul_matches_openvino(server: ServerProcess, sources: Sources, model: str, protocol: str) -> None:
    inputs = batch_of(3, seed=len(model))
    source = sources.add_mul_onnx if model.startswith("onnx") else sources.add_mul_xml
    expected = models.reference(source, inputs)
    np.testing.assert_allclose(expected["OUTPUT1"], inputs["INPUT0"] * models.SCALE, rtol=1e-6)
    _check(_infer(server, protocol, model, inputs), expected)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_inputs_and_outputs_through_system_shared_memory(
    server: ServerProcess, sources: Sources, protocol: str
) -> None:
    inputs = batch_of(2, seed=5)
    url = server.http_url if protocol == "http" else server.grpc_url
    _check(
        infer_through_shared_memory(url, protocol, "ir_config", inputs), models.reference(sources.add_mul_xml, inputs)
    )


def test_auto_completed_config_is_served(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    for model in ("ir_auto", "onnx_auto"):
        config = client.get_model_config(model)
        assert config["backend"] == "openvino"
        assert config["max_batch_size"] == 4
        assert "dynamic_batching" in config
        assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config["input"]] == [
            ("INPUT0", "TYPE_FP32", [4]),
            ("INPUT1", "TYPE_FP32", [4]),
        ]
        assert [t["name"] for t in config["output"]] == ["OUTPUT0", "OUTPUT1"]
    assert client.get_model_config("onnx_auto")["default_model_filename"] == "model.onnx"
    metadata = client.get_model_metadata("ir_auto")
    assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_variable_dimension(server: ServerProcess, sources: Sources, protocol: str) -> None:
    for columns in (1, 7):
        inputs = {"x": np.linspace(-3, 3, 2 * columns, dtype=np.float32).reshape(2, columns)}
        _check(_infer(server, protocol, "ir_varlen", inputs, ["y"]), models.reference(sources.varlen_xml, inputs))
    dims = httpclient.InferenceServerClient(server.http_url).get_model_metadata("ir_varlen")["inputs"][0]["shape"]
    assert dims == [-1, -1]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_static_int_model_does_not_batch(server: ServerProcess, sources: Sources, protocol: str) -> None:
    inputs = {"x": np.arange(6, dtype=np.int64).reshape(2, 3)}
    result = _infer(server, protocol, "ir_int", inputs, ["y"])
    assert result["y"].dtype == np.int64
    np.testing.assert_array_equal(result["y"], models.reference(sources.int_xml, inputs)["y"])
    np.testing.assert_array_equal(result["y"], inputs["x"] * 3 + 1)
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("ir_int")
    assert config["max_batch_size"] == 0
    assert "dynamic_batching" not in config


@pytest.mark.parametrize("model", ["ir_dynamic", "ir_two"])
def test_concurrent_requests_with_dynamic_batching(server: ServerProcess, sources: Sources, model: str) -> None:
    """Concurrent requests of different batch sizes; each answer matches its own input."""
    requests = [batch_of(1 + index % 3, seed=index) for index in range(12)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        futures = [
            pool.submit(_infer, server, ("http", "grpc")[index % 2], model, inputs)
            for index, inputs in enumerate(requests)
        ]
        results = [future.result(timeout=60) for future in futures]
    for inputs, result in zip(requests, results, strict=True):
        _check(result, models.reference(sources.add_mul_xml, inputs))


def test_two_instances_are_loaded(server: ServerProcess) -> None:
    assert "instance 'ir_two_0_0' compiled for OpenVINO device CPU" in server.logs()
    assert "instance 'ir_two_0_1' compiled for OpenVINO device CPU" in server.logs()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_static_batch_one_model_gets_a_dynamic_batch(server: ServerProcess, sources: Sources, protocol: str) -> None:
    """An export with batch 1 serves batches up to max_batch_size (reshaped to a dynamic batch)."""
    inputs = batch_of(5)
    expected = models.reference(sources.add_mul_xml, inputs)
    _check(_infer(server, protocol, "ir_static_batch1", inputs), expected)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_reshape_io_layers(server: ServerProcess, sources: Sources, protocol: str) -> None:
    inputs = batch_of(3, seed=7)
    expected = models.reference(sources.add_mul_xml, inputs)
    _check(_infer(server, protocol, "ir_reshape_io", inputs), expected)


def test_skip_dynamic_batch_size_needs_the_full_batch(server: ServerProcess, sources: Sources) -> None:
    full = batch_of(4)
    _check(infer_http(server.http_url, "ir_skip", full, OUTPUTS), models.reference(sources.add_mul_xml, full))
    with pytest.raises(InferenceServerException) as raised:
        infer_http(server.http_url, "ir_skip", batch_of(2), OUTPUTS)
    assert "expected requests with batch size '4', got '2'" in str(raised.value)
    assert "ENABLE_BATCH_PADDING" in str(raised.value)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_batch_padding(server: ServerProcess, sources: Sources, protocol: str) -> None:
    inputs = batch_of(3, seed=3)
    result = _infer(server, protocol, "ir_skip_pad", inputs)
    assert result["OUTPUT0"].shape == (3, 4)
    _check(result, models.reference(sources.add_mul_xml, inputs))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_config_datatypes_are_converted_by_openvino(server: ServerProcess, protocol: str) -> None:
    """As in Triton: config datatypes that differ from the model's are converted by OpenVINO."""
    inputs = {"INPUT0": np.array([[1.5, -2.0, 0.25, 8.0]], dtype=np.float16), "INPUT1": np.ones((1, 4), np.float32)}
    result = _infer(server, protocol, "ir_convert", inputs)
    assert result["OUTPUT0"].dtype == np.float32
    assert result["OUTPUT1"].dtype == np.float64
    np.testing.assert_allclose(result["OUTPUT0"], inputs["INPUT0"].astype(np.float32) + 1)
    np.testing.assert_allclose(result["OUTPUT1"], inputs["INPUT0"].astype(np.float32) * models.SCALE)


def _infer(
    server: ServerProcess,
    protocol: str,
    model: str,
    inputs: dict[str, npt.NDArray[Any]],
    outputs: Sequence[str] = OUTPUTS,
) -> dict[str, npt.NDArray[Any]]:
    """One request with ``tritonclient.http`` or ``tritonclient.grpc``."""
    url = server.http_url if protocol == "http" else server.grpc_url
    return PROTOCOLS[protocol](url, model, inputs, outputs)
