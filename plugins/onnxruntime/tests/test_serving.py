"""ONNX models served by the real server, asked with the real Triton clients over HTTP and gRPC."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from naiad.testing import ServerProcess, infer_through_shared_memory, start_server

from . import onnx_models
from .conftest import floats, ort_reference, write_model

EXAMPLE_SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "make_example.py"
WEIGHTS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10

# name -> (model, config.pbtxt or None for auto-complete)
MODELS: dict[str, tuple[Any, str | None]] = {
    "add_sub": (
        onnx_models.add_sub(),
        """
        max_batch_size: 8
        dynamic_batching { }
        instance_group [ { count: 2 kind: KIND_CPU } ]
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
    ),
    "add_sub_auto": (onnx_models.add_sub(), None),
    "add_sub_platform": (onnx_models.add_sub(), 'platform: "onnxruntime_onnx"\nmax_batch_size: 0'),
    "int64_scale": (onnx_models.int64_scale(), None),
    "bool_logic": (onnx_models.bool_logic(), None),
    "text": (onnx_models.string_identity(), None),
    "matmul_named": (onnx_models.matmul(WEIGHTS), 'backend: "onnxruntime"\ndefault_model_filename: "net.onnx"'),
    "running_sum": (
        onnx_models.accumulator(),
        """
        max_batch_size: 2
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
        sequence_batching {
          state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
                    initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" } } ]
        }
        """,
    ),
    "ragged": (
        onnx_models.ragged_double(),
        """
        max_batch_size: 8
        dynamic_batching { max_queue_delay_microseconds: 2000000 preferred_batch_size: [ 3 ] }
        input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
        batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_INT32
                        source_input: "INPUT" } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "ENDS" data_type: TYPE_INT32 dims: [ 1 ] } ]
        batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
        """,
    ),
}


def _example_script() -> Any:
    """``examples/make_example.py``, imported from its file."""
    spec = importlib.util.spec_from_file_location("make_example", EXAMPLE_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("onnx") / "models"
    for name, (model, config) in MODELS.items():
        write_model(repo, name, model, config, "net.onnx" if name == "matmul_named" else "model.onnx")
    onnx_models.save_with_external_data(onnx_models.matmul(WEIGHTS), repo / "matmul_external" / "1" / "model.onnx")
    _example_script().write_example(repo)
    process = start_server([repo])
    yield process
    process.stop()


def _infer(
    server: ServerProcess, protocol: str, model: str, inputs: dict[str, npt.NDArray[Any]], outputs: list[str]
) -> dict[str, npt.NDArray[Any]]:
    client: Any
    if protocol == "http":
        module: Any = httpclient
        client = httpclient.InferenceServerClient(server.http_url)
    else:
        module = grpcclient
        client = grpcclient.InferenceServerClient(server.grpc_url)
    tensors = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    requested = [module.InferRequestedOutput(name) for name in outputs]
    result = client.infer(model, tensors, outputs=requested)
    client.close()
    return {name: result.as_numpy(name) for name in outputs}


def _cases() -> list[tuple[str, dict[str, npt.NDArray[Any]]]]:
    a, b = floats(3, 4), floats(3, 4, seed=1)
    return [
        ("add_sub", {"INPUT0": a, "INPUT1": b}),
        ("add_sub_auto", {"INPUT0": a, "INPUT1": b}),
        ("add_sub_platform", {"INPUT0": a, "INPUT1": b}),
        ("add_sub_onnx", {"INPUT0": a, "INPUT1": b}),
        (
            "int64_scale",
            {"X": np.arange(6, dtype=np.int64).reshape(2, 3), "OFFSET": np.full((2, 3), 2**40, dtype=np.int64)},
        ),
        ("bool_logic", {"A": np.array([[True, False, True]]), "B": np.array([[True, True, False]])}),
        ("matmul_named", {"X": floats(2, 4)}),
        ("matmul_external", {"X": floats(3, 4)}),
    ]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("model", "inputs"), _cases(), ids=[case[0] for case in _cases()])
def test_served_results_match_onnxruntime(
    server: ServerProcess, protocol: str, model: str, inputs: dict[str, npt.NDArray[Any]]
) -> None:
    graph = MODELS[model][0] if model in MODELS else None
    if model.startswith("matmul"):
        graph = onnx_models.matmul(WEIGHTS)
    if model == "add_sub_onnx":
        graph = onnx_models.add_sub()
    assert graph is not None
    expected = ort_reference(graph, inputs)
    served = _infer(server, protocol, model, inputs, list(expected))
    for name, value in expected.items():
        assert served[name].dtype == value.dtype, name
        np.testing.assert_allclose(served[name], value, rtol=1e-6)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["add_sub", "int64_scale", "bool_logic"])
def test_inputs_and_outputs_through_system_shared_memory(server: ServerProcess, protocol: str, model: str) -> None:
    inputs = dict(_cases())[model]
    url = server.http_url if protocol == "http" else server.grpc_url
    through_shared_memory = infer_through_shared_memory(url, protocol, model, inputs)
    through_socket = _infer(server, protocol, model, inputs, list(through_shared_memory))
    assert through_socket
    for name, value in through_socket.items():
        np.testing.assert_array_equal(through_shared_memory[name], value)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bytes_tensors_round_trip(server: ServerProcess, protocol: str) -> None:
    text = np.array([[b"naiad", "\u00e9t\u00e9".encode()], [b"", b"onnx runtime"]], dtype=np.object_)
    served = _infer(server, protocol, "text", {"TEXT": text}, ["TEXT_OUT"])["TEXT_OUT"]
    assert served.tolist() == text.tolist()


def test_auto_completed_config_is_served(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("add_sub_auto")
    assert config["platform"] == "onnxruntime_onnx"
    assert config["backend"] == "onnxruntime"
    assert config["max_batch_size"] == 4
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)]
    metadata = client.get_model_metadata("add_sub_auto")
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}
    # As in Triton, an explicit max_batch_size: 0 is the same as none: a batching model gets the default.
    assert client.get_model_config("add_sub_platform")["max_batch_size"] == 4
    scale = client.get_model_config("int64_scale")
    assert scale["max_batch_size"] == 0
    assert [t["dims"] for t in scale["input"]] == [[2, 3], [2, 3]]


@pytest.mark.parametrize("model", ["add_sub", "add_sub_auto"])
def test_concurrent_requests_get_their_own_rows(server: ServerProcess, model: str) -> None:
    def one(index: int) -> None:
        rows = 1 + index % 4
        a, b = floats(rows, 4, seed=index), floats(rows, 4, seed=100 + index)
        served = _infer(
            server, "http" if index % 2 else "grpc", model, {"INPUT0": a, "INPUT1": b}, ["OUTPUT0", "OUTPUT1"]
        )
        np.testing.assert_allclose(served["OUTPUT0"], a + b)
        np.testing.assert_allclose(served["OUTPUT1"], a - b)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(32)))


def test_only_requested_outputs_come_back(server: ServerProcess) -> None:
    a, b = floats(1, 4), floats(1, 4, seed=1)
    client = httpclient.InferenceServerClient(server.http_url)
    tensors = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    result = client.infer("add_sub", tensors, outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert result.as_numpy("OUTPUT0") is None
    np.testing.assert_allclose(result.as_numpy("OUTPUT1"), a - b)


def test_batch_size_over_the_limit_is_rejected(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    tensors = [httpclient.InferInput(name, [5, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    for tensor in tensors:
        tensor.set_data_from_numpy(floats(5, 4))
    with pytest.raises(InferenceServerException, match="batch-size must be <= 4"):
        client.infer("add_sub_auto", tensors)


def test_the_example_script_writes_a_model_folder(tmp_path: Path) -> None:
    assert _example_script().main([str(tmp_path / "repo")]) == 0
    config = (tmp_path / "repo" / "add_sub_onnx" / "config.pbtxt").read_text()
    assert 'backend: "onnxruntime"' in config
    assert (tmp_path / "repo" / "add_sub_onnx" / "1" / "model.onnx").stat().st_size > 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_implicit_state_carries_over_a_sequence(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    sequence_id = 7 if protocol == "http" else 8
    sums = []
    for index, value in enumerate([1.0, 2.0, 3.5]):
        tensor = module.InferInput("IN", [1, 1], "FP32")
        tensor.set_data_from_numpy(np.array([[value]], dtype=np.float32))
        result = client.infer(
            "running_sum", [tensor], sequence_id=sequence_id, sequence_start=index == 0, sequence_end=index == 2
        )
        sums.append(float(result.as_numpy("OUT")[0, 0]))
        assert result.as_numpy("STATE_OUT") is None  # state stays on the server unless asked for
    assert sums == [1.0, 3.0, 6.5]
    client.close()


def test_ragged_requests_share_one_flat_batch_with_their_element_counts(server: ServerProcess) -> None:
    """Triton's ragged batching: three requests of 2, 3 and 4 elements run as one engine call on a flat
    [9] input with INDEX the running element counts (``[2, 5, 9]`` in that order); each gets its own
    elements back in its own shape, and its row of ENDS."""
    lengths = (2, 3, 4)
    arrays = [np.arange(length, dtype=np.float32).reshape(1, length) + 10 * length for length in lengths]
    with ThreadPoolExecutor(len(arrays)) as pool:
        results = list(
            pool.map(lambda array: _infer(server, "http", "ragged", {"INPUT": array}, ["OUT", "ENDS"]), arrays)
        )
    # INDEX is the running total of element counts in the batch's (arrival) order: each request's end
    # is the previous request's end plus its own length
    ends = sorted((int(result["ENDS"][0, 0]), length) for result, length in zip(results, lengths, strict=True))
    assert [end - length for end, length in ends] == [0] + [end for end, _ in ends[:-1]]
    assert ends[-1][0] == sum(lengths)
    for array, result in zip(arrays, results, strict=True):
        np.testing.assert_array_equal(result["OUT"], array * 2)
        assert result["ENDS"].shape == (1, 1)
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("ragged")["model_stats"][0]
    assert [(int(b["batch_size"]), int(b["compute_infer"]["count"])) for b in stats["batch_stats"]] == [(3, 1)]
