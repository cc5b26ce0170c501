"""The trace extension: Triton's settings over HTTP and gRPC, and the traces written in Triton's format."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.errors import NaiadError
from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server
from naiad.trace_settings import TraceSettings, parse_trace_config
from naiad.tracing import Tracer

from .conftest import ADD_SUB, ADD_SUB_CONFIG, STREAM, STREAM_CONFIG

CONFIG = ADD_SUB_CONFIG.format(max_batch_size=0, extra="")
CALLER = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inner = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[pb_utils.get_input_tensor_by_name(request, name) for name in ("INPUT0", "INPUT1")],
                requested_output_names=["OUTPUT0", "OUTPUT1"],
            ).exec()
            if inner.has_error():
                raise pb_utils.TritonModelException(inner.error().message())
            responses.append(pb_utils.InferenceResponse(inner.output_tensors()))
        return responses
"""
ORDER = ("REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")


def _settings(file: str, **changed: Any) -> dict[str, Any]:
    settings = {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": file,
        "trace_mode": "triton",
    }
    return {**settings, **changed}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("tracing")
    repository = ModelRepositoryBuilder(folder / "models")
    repository.add_python_model("add_sub", ADD_SUB, CONFIG)
    repository.add_python_model("other", ADD_SUB, CONFIG)
    file = folder / "trace.json"
    server = start_server([repository.root], f"--trace-config=triton,file={file}")
    yield server, file
    server.stop()


def _post(server: ServerProcess, path: str, body: bytes) -> tuple[int, Any]:
    response = httpx.post(f"http://{server.http_url}{path}", content=body, timeout=30)
    return response.status_code, response.json()


def _add_sub_inputs(module: Any) -> list[Any]:
    """add_sub's two inputs, 0..3 each, as ``module`` (tritonclient.http or .grpc) builds them."""
    inputs = [module.InferInput(name, [4], "FP32") for name in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return inputs


def _infer(client: Any, module: Any, request_id: str, model: str = "add_sub") -> None:
    client.infer(model, _add_sub_inputs(module), request_id=request_id)


def _reset(server: ServerProcess) -> None:
    for path in ("/v2/trace/setting", "/v2/models/add_sub/trace/setting", "/v2/models/other/trace/setting"):
        body = {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None}
        assert _post(server, path, json.dumps(body).encode())[0] == 200


def test_http_settings_answer_as_triton_does(traced: Any) -> None:
    server, file = traced
    _reset(server)
    defaults = _settings(str(file))
    assert httpx.get(f"http://{server.http_url}/v2/trace/setting", timeout=30).json() == defaults
    cases = [  # each answered as Triton 2.51 answers it, in this order (the settings carry over)
        (b'{"trace_level": ["TIMESTAMPS"]}', 200, {"trace_level": ["TIMESTAMPS"]}),
        (b'{"trace_level": "TIMESTAMPS"}', 500, "attempt to access JSON non-array as array"),
        (b'{"trace_level": ["BOGUS"]}', 200, {"trace_level": ["TIMESTAMPS"]}),
        (b'{"trace_level": ["TIMESTAMPS", "TENSORS"]}', 200, {"trace_level": ["TIMESTAMPS", "TENSORS"]}),
        (b'{"trace_level": ["OFF", "TENSORS"]}', 400, "Expect only one trace level 'OFF' is specified"),
        (b'{"trace_rate": 5}', 500, "attempt to access JSON non-string as string"),
        (b'{"trace_rate": "x"}', 400, "Unable to parse 'trace_rate', got: x"),
        (b'{"trace_rate": "0"}', 400, "Attempting to set invalid trace setting :sample rate must be non-zero"),
        (b'{"trace_rate": "-1"}', 200, {"trace_rate": "4294967295"}),
        (b'{"trace_rate": "12a"}', 200, {"trace_rate": "12"}),
        (
            b'{"trace_rate": "99999999999999999999"}',
            400,
            "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999999999999",
        ),
        (  # read as an int (std::stoi): past one is out of range
            b'{"trace_rate": "3000000000"}',
            400,
            "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 3000000000",
        ),
        (
            b'{"trace_count": "10000000000"}',
            400,
            "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 10000000000",
        ),
        (b'{"trace_count": "-2"}', 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"),
        (b'{"trace_count": "3"}', 200, {"trace_count": "3"}),
        (b'{"log_frequency": "abc"}', 400, "Unable to parse 'log_frequency', got: abc"),
        (b'{"log_frequency": "2"}', 200, {"log_frequency": "2"}),
        (b'{"trace_file": "/tmp/x.json"}', 501, "trace file location can not be updated through network protocol"),
        # any trace_file refuses the whole request, a null or another type too; trace_rate stays
        (
            b'{"trace_rate": "7", "trace_file": null}',
            501,
            "trace file location can not be updated through network protocol",
        ),
        (b'{"trace_file": 5}', 501, "trace file location can not be updated through network protocol"),
        (b'{"trace_mode": "opentelemetry", "bogus": "1"}', 200, {}),
        (b"[1]", 200, {}),
        (b"", 500, "failed to parse the request JSON buffer: The document is empty. at 0"),
        (b'{"trace_rate": null}', 200, {"trace_rate": "1000"}),
    ]
    expected = dict(defaults)
    for body, status, answer in cases:
        if isinstance(answer, dict):
            expected.update(answer)
            assert _post(server, "/v2/trace/setting", body) == (status, expected), body
        else:
            assert _post(server, "/v2/trace/setting", body) == (status, {"error": answer}), body


def test_a_model_overrides_and_falls_back_to_the_server_settings(traced: Any) -> None:
    server, file = traced
    _reset(server)
    model = "/v2/models/add_sub/trace/setting"
    assert _post(server, "/v2/trace/setting", b'{"trace_level": ["TIMESTAMPS"], "trace_rate": "12"}')[0] == 200
    assert _post(server, model, b'{"trace_rate": "7"}') == (
        200,
        _settings(str(file), trace_level=["TIMESTAMPS"], trace_rate="7"),
    )
    server_wide = httpx.get(f"http://{server.http_url}/v2/trace/setting", timeout=30).json()
    assert server_wide["trace_rate"] == "12"
    assert _post(server, model, b'{"trace_rate": null}')[1]["trace_rate"] == "12"
    for path in ("/v2/models/nope/trace/setting",):
        assert httpx.get(f"http://{server.http_url}{path}", timeout=30).json() == {
            "error": "Request for unknown model : nope"
        }
        assert _post(server, path, b'{"trace_rate": "7"}') == (400, {"error": "Request for unknown model : nope"})
        assert _post(server, path, b"") == (400, {"error": "Request for unknown model : nope"})  # before the body
    response = httpx.put(f"http://{server.http_url}/v2/trace/setting", content=b"{}", timeout=30)
    assert (response.status_code, response.json()) == (405, {"error": "Method Not Allowed"})


def test_grpc_settings_through_tritonclient(traced: Any) -> None:
    server, file = traced
    _reset(server)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    settings = client.get_trace_settings(as_json=True)["settings"]
    assert settings == {
        key: {"value": value if isinstance(value, list) else [value]} for key, value in _settings(str(file)).items()
    }
    updated = client.update_trace_settings("add_sub", {"trace_rate": "3", "trace_level": ["TIMESTAMPS"]}, as_json=True)
    assert updated["settings"]["trace_rate"] == {"value": ["3"]}
    assert updated["settings"]["trace_level"] == {"value": ["TIMESTAMPS"]}
    cleared = client.update_trace_settings("add_sub", {"trace_level": None}, as_json=True)
    assert cleared["settings"]["trace_level"] == {"value": ["OFF"]}
    for change, model, code, message in (
        ({"trace_rate": "x"}, "", "INVALID_ARGUMENT", "Unable to parse 'trace_rate', got: x"),
        (
            {"trace_count": "-2"},
            "",
            "INVALID_ARGUMENT",
            "Unable to parse 'trace_count'. Expecting value >= -1, got: -2",
        ),
        (
            {"trace_file": "/tmp/z"},
            "",
            "UNIMPLEMENTED",
            "trace file location can not be updated through network protocol",
        ),
        (
            {"trace_file": None},  # even a value that would clear it
            "",
            "UNIMPLEMENTED",
            "trace file location can not be updated through network protocol",
        ),
        ({"trace_rate": "3"}, "nope", "INVALID_ARGUMENT", "Request for unknown model : nope"),
        ({"trace_file": "/tmp/z"}, "nope", "INVALID_ARGUMENT", "Request for unknown model : nope"),  # model first
        ({"trace_rate": ["1", "2"]}, "", "INVALID_ARGUMENT", "expect only 1 value for 'trace_rate'"),
    ):
        with pytest.raises(InferenceServerException) as refused:
            client.update_trace_settings(model, change)
        assert (refused.value.status(), refused.value.message()) == (f"StatusCode.{code}", message)
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.get_trace_settings("add_sub")["trace_rate"] == "3"
    assert "trace" in http.get_server_metadata()["extensions"]


def _tracing_every_request(
    repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
    file: Path,
    **models: tuple[str, str],
) -> ServerProcess:
    """A server over add_sub and ``models`` (name -> model.py, config) tracing every request's
    timestamps into ``file``."""
    for name, (source, config) in {"add_sub": (ADD_SUB, CONFIG), **models}.items():
        repository.add_python_model(name, source, config)
    flags = (f"--trace-config=triton,file={file}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    server: ServerProcess = naiad_server(repository.root, args=flags)
    return server


def _entries(path: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(path.read_text())
    return entries


def _traces(entries: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Trace id -> its request's info, timestamps by name and tensor activities."""
    traces: dict[int, dict[str, Any]] = {}
    for entry in entries:
        trace = traces.setdefault(entry["id"], {"info": None, "stamps": {}, "tensors": []})
        if "timestamps" in entry:
            for stamp in entry["timestamps"]:
                trace["stamps"].setdefault(stamp["name"], []).append(stamp["ns"])
        elif "activity" in entry:
            trace["tensors"].append((entry["activity"], entry["tensor"]))
        else:
            trace["info"] = entry
    return traces


def test_every_nth_request_is_traced_while_the_count_lasts(traced: Any) -> None:
    server, file = traced
    _reset(server)
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    http.update_trace_settings(
        "add_sub",
        {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "2", "trace_count": "2", "log_frequency": "1"},
    )
    for index in range(6):
        _infer(http if index % 2 else grpc, httpclient if index % 2 else grpcclient, f"r{index}")
    _infer(http, httpclient, "untraced", model="other")  # its settings are the server's: OFF
    assert http.get_trace_settings("add_sub")["trace_count"] == "0"
    first, second = _traces(_entries(Path(f"{file}.0"))), _traces(_entries(Path(f"{file}.1")))
    assert [trace["info"]["request_id"] for trace in (*first.values(), *second.values())] == ["r1", "r3"]
    trace = next(iter(first.values()))
    assert trace["info"] == {"id": trace["info"]["id"], "model_name": "add_sub", "model_version": 1, "request_id": "r1"}
    stamps = trace["stamps"]
    assert [stamps[name][0] for name in ORDER] == sorted(stamps[name][0] for name in ORDER)
    assert stamps["COMPUTE_END"][0] <= stamps["REQUEST_END"][0]
    assert len(stamps["INFER_RESPONSE_COMPLETE"]) == 1
    data = "0,1,2,3"
    assert trace["tensors"] == [
        ("TENSOR_QUEUE_INPUT", {"name": "INPUT0", "data": data, "shape": "4", "dtype": "FP32"}),
        ("TENSOR_QUEUE_INPUT", {"name": "INPUT1", "data": data, "shape": "4", "dtype": "FP32"}),
        ("TENSOR_BACKEND_OUTPUT", {"name": "OUTPUT0", "data": "0,2,4,6", "shape": "4", "dtype": "FP32"}),
        ("TENSOR_BACKEND_OUTPUT", {"name": "OUTPUT1", "data": "0,0,0,0", "shape": "4", "dtype": "FP32"}),
    ]


def test_sampling_starts_over_when_the_settings_change(traced: Any) -> None:
    """As in Triton: with ``trace_rate`` N, the N-th request after an update is the first traced,
    whatever was sampled before it."""
    server, file = traced
    _reset(server)
    http = httpclient.InferenceServerClient(server.http_url)
    http.update_trace_settings("other", {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1"})
    _infer(http, httpclient, "before", model="other")
    http.update_trace_settings("other", {"trace_rate": "3"})
    for index in range(7):
        _infer(http, httpclient, f"after{index}", model="other")
    _reset(server)
    traced_ids = [
        trace["info"]["request_id"]
        for path in sorted(file.parent.glob(f"{file.name}.*"), key=lambda found: int(found.suffix[1:]))
        for trace in _traces(_entries(path)).values()
        if trace["info"] and trace["info"]["model_name"] == "other"
    ]
    assert traced_ids == ["before", "after2", "after5"]


def test_traces_are_written_to_the_file_when_the_server_stops(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file)
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.get_trace_settings()["trace_level"] == ["TIMESTAMPS"]
    for index in range(3):
        _infer(http, httpclient, f"q{index}")
    assert not file.exists()
    assert server.stop() == 0
    traces = _traces(_entries(file))
    assert [trace["info"]["request_id"] for trace in traces.values()] == ["q0", "q1", "q2"]
    assert all(set(ORDER) <= set(trace["stamps"]) and not trace["tensors"] for trace in traces.values())


def test_a_request_made_while_serving_a_traced_one_names_its_parent(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file, caller=(CALLER, CONFIG))
    _infer(httpclient.InferenceServerClient(server.http_url), httpclient, "outer", model="caller")
    assert server.stop() == 0
    infos = {trace["info"]["model_name"]: trace["info"] for trace in _traces(_entries(file)).values()}
    assert set(infos) == {"caller", "add_sub"}
    assert "parent_id" not in infos["caller"]
    assert infos["add_sub"]["parent_id"] == infos["caller"]["id"]
    stamps = {trace["info"]["model_name"]: trace["stamps"] for trace in _traces(_entries(file)).values()}
    assert set(ORDER) <= set(stamps["add_sub"])
    assert "INFER_RESPONSE_COMPLETE" not in stamps["add_sub"]  # only a frontend stamps it, as in Triton
    assert len(stamps["caller"]["INFER_RESPONSE_COMPLETE"]) == 1


ENSEMBLE = """
platform: "ensemble"
max_batch_size: 0
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ {
  model_name: "add_sub" model_version: -1
  input_map [ { key: "INPUT0" value: "A" }, { key: "INPUT1" value: "B" } ]
  output_map { key: "OUTPUT0" value: "SUM" }
} ] }
"""


def test_an_ensembles_trace_has_no_compute_timestamps_as_in_triton(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    file = tmp_path / "trace.json"
    model_repository.add_model("pipeline", ENSEMBLE, {"1/.keep": ""})
    server = _tracing_every_request(model_repository, naiad_server, file)
    tensors = [httpclient.InferInput(name, [4], "FP32") for name in ("A", "B")]
    for tensor in tensors:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    httpclient.InferenceServerClient(server.http_url).infer("pipeline", tensors)
    assert server.stop() == 0
    traces = {trace["info"]["model_name"]: trace for trace in _traces(_entries(file)).values()}
    assert list(traces["pipeline"]["stamps"]) == [  # Triton 2.51's, side by side
        "HTTP_RECV_START",
        "HTTP_RECV_END",
        "REQUEST_START",
        "QUEUE_START",
        "INFER_RESPONSE_COMPLETE",
        "REQUEST_END",
        "HTTP_SEND_START",
        "HTTP_SEND_END",
    ]
    assert traces["add_sub"]["info"]["parent_id"] == traces["pipeline"]["info"]["id"]
    assert list(traces["add_sub"]["stamps"]) == [*ORDER, "REQUEST_END"]


def _stream(server: ServerProcess, requests: list[tuple[str, str, list[Any]]]) -> None:
    """Send (model, request id, inputs) on one ModelStreamInfer call; wait for every final response."""
    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put(error or result))
    for model, request_id, inputs in requests:
        client.async_stream_infer(model, inputs, request_id=request_id, enable_empty_final_response=True)
    finals = 0
    while finals < len(requests):
        answer = answers.get(timeout=30)
        assert not isinstance(answer, InferenceServerException), answer
        finals += answer.get_response().parameters["triton_final_response"].bool_param
    client.stop_stream()


def test_frontends_stamp_reading_each_request_and_writing_its_responses(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file, stream=(STREAM, STREAM_CONFIG))
    http = httpclient.InferenceServerClient(server.http_url)
    _infer(http, httpclient, "http-lane")
    inputs = _add_sub_inputs(httpclient)
    http.infer("add_sub", inputs, request_id="http-asgi", request_compression_algorithm="gzip")  # not the lane
    _infer(grpcclient.InferenceServerClient(server.grpc_url), grpcclient, "grpc-unary")
    stream_inputs = _add_sub_inputs(grpcclient)
    count = grpcclient.InferInput("IN", [1], "INT32")
    count.set_data_from_numpy(np.array([3], dtype=np.int32))
    _stream(server, [("add_sub", "grpc-stream", stream_inputs), ("stream", "grpc-decoupled", [count])])
    body = {"id": "generate", "INPUT0": [0, 1, 2, 3], "INPUT1": [0, 1, 2, 3]}
    assert httpx.post(f"http://{server.http_url}/v2/models/add_sub/generate", json=body, timeout=30).status_code == 200
    body = {"id": "generate-stream", "IN": [2]}
    answer = httpx.post(f"http://{server.http_url}/v2/models/stream/generate_stream", json=body, timeout=30)
    assert answer.text.count("data:") == 2
    assert server.stop() == 0
    traces = {trace["info"]["request_id"]: trace["stamps"] for trace in _traces(_entries(file)).values()}
    assert set(traces) == {
        "http-lane", "http-asgi", "grpc-unary", "grpc-stream", "grpc-decoupled", "generate", "generate-stream"
    }  # fmt: skip
    writes = {"grpc-decoupled": 4}  # three responses and the empty final one
    for request_id, stamps in traces.items():
        prefix = "HTTP" if request_id.startswith(("http", "generate")) else "GRPC"
        read_start, read_end = ("RECV_START", "RECV_END") if prefix == "HTTP" else ("WAITREAD_START", "WAITREAD_END")
        assert stamps[f"{prefix}_{read_start}"][0] <= stamps[f"{prefix}_{read_end}"][0] <= stamps["REQUEST_START"][0]
        sends = list(zip(stamps[f"{prefix}_SEND_START"], stamps[f"{prefix}_SEND_END"], strict=True))
        assert len(sends) == writes.get(request_id, 1), request_id
        assert all(start <= end for start, end in sends), request_id
        assert sends[0][0] >= stamps["INFER_RESPONSE_COMPLETE"][0], request_id
        assert len(stamps["INFER_RESPONSE_COMPLETE"]) == 1, request_id  # Triton stamps the first response only
        assert not any(name.startswith("HTTP" if prefix == "GRPC" else "GRPC") for name in stamps), request_id


TYPES_CONFIG = """
backend: "python"
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] }, { name: "HALF" data_type: TYPE_FP16 dims: [ 2 ] } ]
output [ { name: "TEXT_OUT" data_type: TYPE_STRING dims: [ 2 ] } ]
"""

TYPES = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        texts = [pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("TEXT_OUT", text)]) for text in texts]
"""


def test_trace_entries_are_written_as_triton_writes_them(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """No request id: none in the header; TENSORS alone: no header at all; BYTES values quoted, FP16 values
    left out; compact JSON."""
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file, types=(TYPES, TYPES_CONFIG))
    http = httpclient.InferenceServerClient(server.http_url)
    text = httpclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"ab", b"c"], dtype=np.object_))
    half = httpclient.InferInput("HALF", [2], "FP16")
    half.set_data_from_numpy(np.array([1.5, 2], dtype=np.float16))
    http.infer("types", [text, half])
    http.update_trace_settings(settings={"trace_level": ["TENSORS"]})
    http.infer("types", [text, half], request_id="tensors-only")
    assert server.stop() == 0
    written = file.read_text()
    assert ", " not in written
    assert ": " not in written
    entries = _entries(file)
    headers = [entry for entry in entries if "model_name" in entry]
    assert headers == [{"id": headers[0]["id"], "model_name": "types", "model_version": 1}]
    tensors = {(e["id"], e["tensor"]["name"]): e["tensor"]["data"] for e in entries if "activity" in e}
    assert set(tensors.values()) == {'"ab","c"', ""}
    assert {name for _, name in tensors} == {"TEXT", "HALF", "TEXT_OUT"}
    assert len({trace_id for trace_id, _ in tensors}) == 1  # only the TENSORS-level request logs tensors


def test_trace_config_flags() -> None:
    assert parse_trace_config([]) == TraceSettings()
    assert parse_trace_config(
        ["triton,file=/tmp/t.json", "level=TIMESTAMPS", "level=TENSORS", "rate=5", "count=-1", "log-frequency=10"]
    ) == TraceSettings(level=("TIMESTAMPS", "TENSORS"), rate=5, count=-1, log_frequency=10, file="/tmp/t.json")
    # Triton's level words, in any case; an OFF anywhere turns tracing off.
    for word in ("min", "MAX", "On", "true", "timestamps"):
        assert parse_trace_config([f"level={word}"]).level == ("TIMESTAMPS",)
    assert parse_trace_config(["level=tensors", "level=false"]).level == ()
    assert parse_trace_config(["level=OFF", "level=TIMESTAMPS"]).level == ()
    for entry, problem in (
        ("opentelemetry,url=x", "'triton' mode only"),
        ("level=LOUD", "invalid value for trace level option: loud"),
        ("rate=0", "must be non-zero"),
        ("count=-5", "Expecting value >= -1"),
        ("colour=red", "unknown setting 'colour'"),
        ("level", "expected KEY=VALUE"),
    ):
        with pytest.raises(ValueError, match=problem):
            parse_trace_config([entry])


def test_tracing_on_needs_a_rate_and_a_file_as_in_triton() -> None:
    """What Triton 2.51 answered a server started without a trace file; a refused change changes nothing."""
    assert Tracer(TraceSettings()).update("", {"rate": 0}).rate == 0  # tracing off takes anything
    tracer = Tracer(TraceSettings())
    for model, change in (
        ("", {"level": ("TIMESTAMPS",)}),
        ("", {"rate": 5, "level": ("TENSORS",)}),
        ("m", {"level": ("TIMESTAMPS",)}),
    ):
        with pytest.raises(NaiadError) as refused:
            tracer.update(model, change)
        assert refused.value.message == "Attempting to set invalid trace setting :trace file name is not given"
    assert tracer.settings() == tracer.settings("m") == TraceSettings()
    on = Tracer(TraceSettings(file="/tmp/trace.json"))
    with pytest.raises(NaiadError) as refused:
        on.update("", {"rate": 0, "level": ("TIMESTAMPS",)})
    assert refused.value.message == "Attempting to set invalid trace setting :sample rate must be non-zero"
    assert on.update("", {"level": ("TIMESTAMPS",)}).level == ("TIMESTAMPS",)


def test_each_generation_of_settings_writes_its_traces_as_triton_does(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Triton's L0_trace: a spent ``trace_count`` writes that generation's traces to the next numbered
    file at once; what a generation with ``log_frequency`` leaves goes to a numbered file too; what
    the first generation traced goes to the file itself. A request made for an untraced one (BLS)
    is not traced, and not counted towards the rate."""
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file, caller=(CALLER, CONFIG))
    http = httpclient.InferenceServerClient(server.http_url)
    for index in range(3):
        _infer(http, httpclient, f"first{index}")
    http.update_trace_settings(settings={"trace_count": "2"})
    for index in range(3):
        _infer(http, httpclient, f"counted{index}")
    assert [info["request_id"] for info in _infos(Path(f"{file}.0"))] == ["counted0", "counted1"]  # at once
    http.update_trace_settings("caller", {"trace_count": "-1", "trace_rate": "2", "log_frequency": "2"})
    for index in range(6):
        _infer(http, httpclient, f"bls{index}", model="caller")
    assert server.stop() == 0
    assert [info["request_id"] for info in _infos(file)] == ["first0", "first1", "first2"]
    # every 2nd caller request, each with the request it made; 2 of them a file, the last one at the end
    first_two = _infos(Path(f"{file}.1"))
    assert sorted(info["request_id"] for info in first_two if info["model_name"] == "caller") == ["bls1", "bls3"]
    assert [info["model_name"] for info in first_two].count("add_sub") == 2
    last = _infos(Path(f"{file}.2"))
    assert sorted((info["model_name"], info.get("request_id", "")) for info in last) == [
        ("add_sub", ""),
        ("caller", "bls5"),
    ]
    assert not Path(f"{file}.3").exists()


def _infos(path: Path) -> list[dict[str, Any]]:
    return [trace["info"] for trace in _traces(_entries(path)).values()]


SLEEPER = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            time.sleep(float(seconds.flatten()[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("DONE", seconds)]))
        return responses
"""

ORDERED = """
max_batch_size: 1
input [ { name: "SECONDS" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "DONE" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { preserve_ordering: true }
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


def test_a_response_held_for_ordering_is_stamped_when_released(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Triton stamps INFER_RESPONSE_COMPLETE when a held response goes out (its L0_batcher
    verify_timestamps.py -p checks it), not when the model made it."""
    file = tmp_path / "trace.json"
    server = _tracing_every_request(model_repository, naiad_server, file, ordered=(SLEEPER, ORDERED))

    def send(seconds: float) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("SECONDS", [1, 1], "FP32")
        tensor.set_data_from_numpy(np.array([[seconds]], dtype=np.float32))
        client.infer("ordered", [tensor])
        client.close()

    slow = threading.Thread(target=send, args=(0.4,))
    slow.start()
    time.sleep(0.1)
    send(0.0)  # runs on the other instance at once, and waits for the slow one's answer
    slow.join()
    assert server.stop() == 0
    traces = sorted(_traces(_entries(file)).values(), key=lambda trace: trace["info"]["id"])
    first, second = (trace["stamps"] for trace in traces if trace["info"]["model_name"] == "ordered")
    assert second["COMPUTE_END"][0] < first["COMPUTE_END"][0]  # the second finished first ...
    assert second["INFER_RESPONSE_COMPLETE"][0] >= first["INFER_RESPONSE_COMPLETE"][0]  # ... and went out after
    assert second["REQUEST_END"][0] < first["COMPUTE_END"][0]  # its request ended when it ran, as in Triton
