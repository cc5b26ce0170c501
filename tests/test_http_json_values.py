"""JSON tensor data and the generate extension's answers, as Triton 2.51 gives them.

Every expected status and body here is what a real Triton 2.51 answered to the same request on the
same models: JSON values read by type (booleans for BOOL, 64-bit integers cast to the width for the
integer types, numbers for the float types), and the generate extension's statuses and events when a
model answers with errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

TYPES = {"I8": "INT8", "I32": "INT32", "I64": "INT64", "U16": "UINT16", "U64": "UINT64", "F": "FP32", "B": "BOOL"}
GOOD: dict[str, Any] = {"I8": 1, "I32": 1, "I64": 1, "U16": 1, "U64": 1, "F": 1.5, "B": True}

ECHO_TYPES = f"""
import triton_python_backend_utils as pb_utils

NAMES = {list(TYPES)!r}


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor(n + "_OUT", pb_utils.get_input_tensor_by_name(r, n).as_numpy()) for n in NAMES]
            )
            for r in requests
        ]
"""

ECHO_TYPES_CONFIG = (
    'backend: "python"\ninput [ '
    + ", ".join(f'{{ name: "{name}" data_type: TYPE_{kind} dims: [ 1 ] }}' for name, kind in TYPES.items())
    + " ]\noutput [ "
    + ", ".join(f'{{ name: "{name}_OUT" data_type: TYPE_{kind} dims: [ 1 ] }}' for name, kind in TYPES.items())
    + " ]\n"
)

ECHO_ONE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        outputs = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "{name}").as_numpy()
            outputs.append(pb_utils.InferenceResponse([pb_utils.Tensor("{name}_OUT", data)]))
        return outputs
"""


def _echo_one(name: str, kind: str, dims: str) -> tuple[str, str]:
    """A python model that answers its one input ``name`` as ``{name}_OUT``, and its config."""
    config = (
        f'backend: "python"\ninput [ {{ name: "{name}" data_type: TYPE_{kind} dims: [ {dims} ] }} ]\n'
        f'output [ {{ name: "{name}_OUT" data_type: TYPE_{kind} dims: [ {dims} ] }} ]\n'
    )
    return ECHO_ONE.replace("{name}", name), config


DECOUPLED = """
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

SENDER = """
import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def ok(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))])


def failed(message):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
{sends}
        return None
"""

# Each decoupled model's sends, one per line of its execute loop.
SENDS = {
    "ok_failed_ok": [
        "sender.send(ok(1))",
        'sender.send(failed("midstream failure"))',
        "sender.send(ok(3), flags=FINAL)",
    ],
    "failed_ok": ['sender.send(failed("first failed"))', "sender.send(ok(2), flags=FINAL)"],
    "failed_only": ['sender.send(failed("only failed"), flags=FINAL)'],
    "failed_then_flag": ['sender.send(failed("failed then flag"))', "sender.send(flags=FINAL)"],
    "ok_then_failed": ["sender.send(ok(1))", 'sender.send(failed("last failed"), flags=FINAL)'],
}

ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model that generates "
    "various number of responses"
)
SIGNED = "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"
UNSIGNED = "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"
NUMBER = "Unable to parse 'data': attempt to access JSON non-number as double"
BOOLEAN = "Unable to parse 'data': attempt to access JSON non-boolean as boolean"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("json_values") / "models")
    repository.add_python_model("echo_types", ECHO_TYPES, ECHO_TYPES_CONFIG)
    repository.add_python_model("echo_half", *_echo_one("H", "FP16", "1"))
    repository.add_python_model("echo_text", *_echo_one("S", "STRING", "-1"))
    repository.add_python_model("echo_word", *_echo_one("W", "STRING", "1"))
    repository.add_python_model("echo_floats", *_echo_one("F", "FP32", "-1"))
    repository.add_python_model("echo_grid", *_echo_one("G", "FP32", "-1, -1"))
    for name, sends in SENDS.items():
        body = "\n".join(" " * 12 + send for send in sends)
        repository.add_python_model(name, SENDER.replace("{sends}", body), DECOUPLED)
    examples = Path(__file__).resolve().parent.parent / "examples" / "model_repository"
    repository.add_model(
        "add_sub",
        (examples / "add_sub" / "config.pbtxt").read_text(),
        {"1/model.py": (examples / "add_sub" / "1" / "model.py").read_text()},
    )
    running = start_server([repository.root])
    yield running
    running.stop()


def _post(server: ServerProcess, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"http://{server.http_url}/v2/models/{path}", content=json.dumps(body), timeout=30)


def _infer_body(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "inputs": [
            {"name": name, "shape": [1], "datatype": TYPES[name], "data": [value]} for name, value in values.items()
        ]
    }


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("I64", 2**63, SIGNED),
        ("I64", 100.0, SIGNED),
        ("I32", "1", SIGNED),
        ("I32", None, SIGNED),
        ("I32", {}, SIGNED),
        ("I32", True, SIGNED),
        ("U64", -1, UNSIGNED),
        ("U64", 2**64, UNSIGNED),
        ("U16", 1.0, UNSIGNED),
        ("F", None, NUMBER),
        ("F", "1.5", NUMBER),
        ("F", True, NUMBER),
        ("B", "true", BOOLEAN),
        ("B", 0, BOOLEAN),
    ],
)
def test_a_json_value_of_the_wrong_kind_is_refused_on_infer_and_generate(
    server: ServerProcess, name: str, value: Any, error: str
) -> None:
    values = {**GOOD, name: value}
    for response in (
        _post(server, "echo_types/infer", _infer_body(values)),
        _post(server, "echo_types/generate", {key: [item] for key, item in values.items()}),
    ):
        assert (response.status_code, response.json()) == (500, {"error": error})


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("I8", 200, -56),
        ("I8", -200, 56),
        ("I32", 2**40, 0),
        ("U16", 70000, 4464),
        ("I64", -(2**63), -(2**63)),
        ("U64", 2**64 - 1, 2**64 - 1),
        ("F", 3, 3.0),
    ],
)
def test_an_integer_is_cast_to_the_width_of_its_type(
    server: ServerProcess, name: str, value: int, expected: float
) -> None:
    values = {**GOOD, name: value}
    inferred = _post(server, "echo_types/infer", _infer_body(values)).json()
    outputs = {output["name"]: output["data"][0] for output in inferred["outputs"]}
    assert outputs[f"{name}_OUT"] == expected
    generated = _post(server, "echo_types/generate", {key: [item] for key, item in values.items()}).json()
    assert generated[f"{name}_OUT"] == expected


def test_an_fp32_beyond_its_range_is_infinite_as_in_triton(server: ServerProcess) -> None:
    response = _post(server, "echo_types/generate", {**GOOD, "F": 1e40})
    assert response.status_code == 200
    assert '"F_OUT":Infinity' in response.text


def test_generate_reads_nested_arrays_as_the_data_of_an_input(server: ServerProcess) -> None:
    response = _post(server, "add_sub/generate", {"INPUT0": [[1], [3], [5], [6]], "INPUT1": [1, 1, 1, 1]})
    assert response.json()["OUTPUT0"] == [2.0, 4.0, 6.0, 7.0]
    response = _post(server, "add_sub/generate", {"INPUT0": [[1, 2], [3, 4], [5], [6]], "INPUT1": [1, 1, 1, 1]})
    assert (response.status_code, response.json()) == (
        500,
        {"error": "Unable to parse 'data': Shape does not match true shape of 'data' field"},
    )


def test_generate_reads_strings_before_it_fits_them_to_the_shape(server: ServerProcess) -> None:
    response = _post(server, "echo_word/generate", {"W": [1, 2]})
    assert (response.status_code, response.json()) == (
        500,
        {"error": "Unable to parse JSON bytes array: attempt to access JSON non-string as string"},
    )
    response = _post(server, "echo_word/generate", {"W": ["a", "b"]})
    assert (response.status_code, response.json()) == (
        400,
        {"error": "The schema can not convert input 'W' to tensor with proper shape"},
    )


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ([], 500, "attempt to get members for non-object"),
        ({"id": 5}, 500, "Unable to parse 'id': attempt to access JSON non-string as string"),
        ({"id": None}, 500, "Unable to parse 'id': attempt to access JSON non-string as string"),
        (
            {"parameters": None},
            500,
            "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object",
        ),
        (
            {"id": "abc", "parameters": {"INPUT1": [1, 1, 1, 1]}},
            400,
            "Converting keyword: 'parameters': [request id: abc] input 'INPUT1' already exists in request",
        ),
        (
            {"parameters": {"INPUT0": [9, 9, 9, 9]}},
            400,
            "Converting keyword: 'parameters': [request id: <id_unknown>] input 'INPUT0' already exists in request",
        ),
    ],
)
def test_generate_body_errors(server: ServerProcess, body: Any, status: int, error: str) -> None:
    if isinstance(body, dict):
        body = {"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], **body}
    response = _post(server, "add_sub/generate", body)
    assert (response.status_code, response.json()) == (status, {"error": error})


def test_generate_takes_an_input_from_the_parameters_object(server: ServerProcess) -> None:
    response = _post(server, "add_sub/generate", {"INPUT0": [1, 2, 3, 4], "parameters": {"INPUT1": [1, 1, 1, 1]}})
    assert response.json()["OUTPUT0"] == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize(
    ("model", "status", "body"),
    [
        ("ok_failed_ok", 200, {"error": ONE_RESPONSE}),
        ("failed_ok", 400, {"error": ONE_RESPONSE}),
        ("failed_only", 400, {"error": "only failed"}),
        ("failed_then_flag", 400, {"error": "failed then flag"}),
        ("ok_then_failed", 200, {"error": ONE_RESPONSE}),
    ],
)
def test_generate_counts_failed_responses_and_answers_400_when_the_first_failed(
    server: ServerProcess, model: str, status: int, body: dict[str, str]
) -> None:
    response = _post(server, f"{model}/generate", {"IN": [1]})
    assert (response.status_code, response.json()) == (status, body)


def _ok(model: str, value: int) -> str:
    return json.dumps({"OUT": value, "model_name": model, "model_version": "1"}, separators=(",", ":"))


@pytest.mark.parametrize(
    ("model", "status", "events"),
    [
        ("ok_failed_ok", 200, [_ok("ok_failed_ok", 1), '{"error":"midstream failure"}', _ok("ok_failed_ok", 3)]),
        ("failed_ok", 400, ['{"error":"first failed"}', _ok("failed_ok", 2)]),
        ("failed_only", 400, ['{"error":"only failed"}']),
        ("failed_then_flag", 400, ['{"error":"failed then flag"}']),
        ("ok_then_failed", 200, [_ok("ok_then_failed", 1), '{"error":"last failed"}']),
    ],
)
def test_generate_stream_goes_on_after_a_failed_response(
    server: ServerProcess, model: str, status: int, events: list[str]
) -> None:
    response = _post(server, f"{model}/generate_stream", {"IN": [1]})
    assert response.status_code == status
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.text == "".join(f"data: {event}\n\n" for event in events)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"   ", "The document is empty. at 3"),
        (b"\x00\x01\x02garbage", "The document is empty. at 0"),
        (b"not json", "Invalid value. at 1"),
        (b"xyz", "Invalid value. at 0"),
        (b"falsy", "Invalid value. at 4"),
        (b"-", "Invalid value. at 1"),
        (b"[1,]", "Invalid value. at 3"),
        (b'{"a": +1}', "Invalid value. at 6"),
        (b"1.", "Miss fraction part in number. at 2"),
        (b'{"a": 1.5e}', "Miss exponent in number. at 10"),
        (b"01", "The document root must not be followed by other values. at 1"),
        (b"{}{}", "The document root must not be followed by other values. at 2"),
        (b"{'a': 1}", "Missing a name for object member. at 1"),
        (b'{"a":1,}', "Missing a name for object member. at 7"),
        (b'{"a" 1}', "Missing a colon after a name of object member. at 5"),
        (b'{"a": 1 "b": 2}', "Missing a comma or '}' after an object member. at 8"),
        (b'{"a": [1, 2}', "Missing a comma or ']' after an array element. at 11"),
        (b'{"a": "abc', "Missing a closing quotation mark in string. at 10"),
        (b'"\\x"', "Invalid escape character in string. at 1"),
        (b'{"a": "x\x01y"}', "Invalid escape character in string. at 8"),
        (b'{"a": "\\u12G4"}', "Incorrect hex digit after \\u escape in string. at 7"),
    ],
)
def test_a_body_that_is_not_json_is_worded_as_triton_words_it(server: ServerProcess, body: bytes, error: str) -> None:
    for endpoint in ("infer", "generate"):
        response = httpx.post(f"http://{server.http_url}/v2/models/add_sub/{endpoint}", content=body, timeout=30)
        assert (response.status_code, response.json()) == (
            500,
            {"error": f"failed to parse the request JSON buffer: {error}"},
        )


@pytest.mark.parametrize("body", [b'{"a": "\xff"}', b'{"a": NaN}', b'{"a": -Infinity}', b"\xef\xbb\xbf{}"])
def test_what_tritons_parser_takes_is_json(server: ServerProcess, body: bytes) -> None:
    response = httpx.post(f"http://{server.http_url}/v2/models/add_sub/infer", content=body, timeout=30)
    assert response.json() == {
        "error": "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"
    }


def test_an_empty_infer_body_is_raw_data(server: ServerProcess) -> None:
    response = httpx.post(f"http://{server.http_url}/v2/models/add_sub/infer", content=b"", timeout=30)
    assert response.status_code == 400
    assert response.json()["error"].startswith("[request id: <id_unknown>] Raw request must only have 1 input")


def _raw(server: ServerProcess, model: str, body: bytes) -> httpx.Response:
    """An infer request whose whole body is the data of the model's one input (no JSON header)."""
    url = f"http://{server.http_url}/v2/models/{model}/infer"
    return httpx.post(url, content=body, headers={"Inference-Header-Content-Length": "0"}, timeout=30)


def test_a_raw_body_is_the_one_element_of_a_bytes_input_as_in_triton(server: ServerProcess) -> None:
    served = _raw(server, "echo_word", b"427")  # no length prefix: the body is the element
    assert served.status_code == 200
    length = int(served.headers["Inference-Header-Content-Length"])
    assert json.loads(served.content[:length])["outputs"][0]["shape"] == [1]
    assert served.content[length:] == b"\x03\x00\x00\x00427"
    refused = _raw(server, "echo_text", b"427")
    assert (refused.status_code, refused.json()) == (
        400,
        {"error": "[request id: <id_unknown>] For BYTE datatype raw input 'S', the model must have input shape [1]"},
    )


def test_a_raw_body_sizes_the_one_variable_dimension_as_in_triton(server: ServerProcess) -> None:
    served = _raw(server, "echo_floats", np.array([1.5, 2.5], np.float32).tobytes())
    length = int(served.headers["Inference-Header-Content-Length"])
    assert json.loads(served.content[:length])["outputs"][0]["shape"] == [2]
    uneven = _raw(server, "echo_floats", bytes(7))
    assert (uneven.status_code, uneven.json()) == (  # Triton names the input as the raw request did
        400,
        {
            "error": "[request id: <id_unknown>] input byte size mismatch for input 'raw_input' for model "
            "'echo_floats'. Expected 4, got 7"
        },
    )
    two_variable = _raw(server, "echo_grid", bytes(8))
    assert (two_variable.status_code, two_variable.json()) == (
        400,
        {
            "error": "[request id: <id_unknown>] The shape of the raw input 'G' can not be deduced because there "
            "are more than one variable-sized dimension"
        },
    )


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [
        (b'{"W": "a", "W": "b"}', 400, {"error": "[request id: <id_unknown>] input 'W' already exists in request"}),
        (
            b'{"parameters": {"W": "b"}, "W": "a"}',  # read in the body's order
            400,
            {"error": "[request id: <id_unknown>] input 'W' already exists in request"},
        ),
        (
            b'{"W": "a", "parameters": {"x": {"y": 1}}}',
            400,
            {
                "error": "Converting keyword: 'parameters': parameter 'x' has invalid type. It should be either "
                "'int', 'bool', or 'string'."
            },
        ),
        (b'{"W": "a", "p": 1, "p": 2}', 200, {"W_OUT": "a", "model_name": "echo_word", "model_version": "1"}),
    ],
)
def test_generate_reads_keys_written_twice_as_triton_does(
    server: ServerProcess, body: bytes, status: int, answer: dict[str, Any]
) -> None:
    response = httpx.post(f"http://{server.http_url}/v2/models/echo_word/generate", content=body, timeout=30)
    assert (response.status_code, response.json()) == (status, answer)


A4 = [
    {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
]


UNSIGNED_PARAMETER = "attempt to access JSON non-unsigned-integer as unsigned-integer"


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        (
            {"priority": -1},
            "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        (
            {"timeout": "5"},
            "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        ({"sequence_id": 1.5}, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"),
        ({"sequence_id": -1}, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"),
        ({"sequence_start": 1}, "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"),
        ({"sequence_end": "x"}, "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"),
        # Values no parameter may hold are read as the parameter's own type first, as Triton does.
        ({"sequence_id": [1]}, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"),
        ({"sequence_id": None}, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"),
        ({"priority": {}}, "Unable to parse 'priority': " + UNSIGNED_PARAMETER),
        (
            {"binary_data_output": [True]},
            "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean",
        ),
    ],
)
def test_scheduling_parameters_are_read_by_json_type(
    server: ServerProcess, parameters: dict[str, Any], error: str
) -> None:
    response = _post(server, "add_sub/infer", {"inputs": A4, "parameters": parameters})
    assert (response.status_code, response.json()) == (500, {"error": error})


@pytest.mark.parametrize("member", ["shape", "datatype"])
def test_an_input_without_its_shape_or_datatype(server: ServerProcess, member: str) -> None:
    inputs = [{key: value for key, value in A4[0].items() if key != member}, A4[1]]
    response = _post(server, "add_sub/infer", {"inputs": inputs})
    error = f"Unable to parse '{member}': attempt to access non-existing object member '{member}'"
    assert (response.status_code, response.json()) == (500, {"error": error})


def test_the_header_length_is_read_as_atoi_reads_it(server: ServerProcess) -> None:
    header = json.dumps({"inputs": A4}).encode()
    url = f"http://{server.http_url}/v2/models/add_sub/infer"
    raw = httpx.post(url, content=header, headers={"Inference-Header-Content-Length": "abc"}, timeout=30)
    assert raw.json()["error"].startswith("[request id: <id_unknown>] Raw request must only have 1 input")
    negative = httpx.post(url, content=header, headers={"Inference-Header-Content-Length": "-1"}, timeout=30)
    assert negative.json() == {"error": f"inference header size should be in range (0, {len(header)}), got: -1"}
    padded = httpx.post(url, content=header, headers={"Inference-Header-Content-Length": f"{len(header)}x"}, timeout=30)
    assert padded.status_code == 200


@pytest.mark.parametrize("chunked", [False, True])  # the fast lane, and the ASGI path
def test_an_fp16_output_asked_for_as_json_is_refused_as_triton_refuses_it(server: ServerProcess, chunked: bool) -> None:
    header = json.dumps(
        {"inputs": [{"name": "H", "shape": [1], "datatype": "FP16", "parameters": {"binary_data_size": 2}}]}
    ).encode()
    body = header + np.array([1.5], dtype=np.float16).tobytes()
    content: Any = iter([body]) if chunked else body
    response = httpx.post(
        f"http://{server.http_url}/v2/models/echo_half/infer",
        content=content,
        headers={"Inference-Header-Content-Length": str(len(header))},
        timeout=30,
    )
    assert (response.status_code, response.headers["content-type"], response.text) == (
        400,
        "text/plain",
        '{"error":"sending FP16 data via JSON is not supported. Please use the binary data format for output"}',
    )


def test_text_is_written_in_utf8_as_triton_writes_it(server: ServerProcess) -> None:
    """Byte for byte what Triton 2.51 answered: UTF-8 text, control characters escaped, DEL as is."""
    texts = ["\u00e9\U0001f600", 'a"b\u0001\u007f']
    body = {"inputs": [{"name": "S", "shape": [2], "datatype": "BYTES", "data": texts}]}
    answer = _post(server, "echo_text/infer", body)
    assert answer.status_code == 200
    assert answer.content.endswith(b'"data":["\xc3\xa9\xf0\x9f\x98\x80","a\\"b\\u0001\x7f"]}]}')
    assert json.loads(answer.content)["outputs"][0]["data"] == texts

    misnamed = {"inputs": [{"name": "S\u00e9", "shape": [1], "datatype": "BYTES", "data": ["x"]}]}
    refused = _post(server, "echo_text/infer", misnamed)
    assert refused.status_code == 400
    assert refused.content == b"{\"error\":\"unexpected inference input 'S\xc3\xa9' for model 'echo_text'\"}"

    generated = _post(server, "echo_text/generate", {"S": ["\u00e9"]})
    assert generated.content == b'{"S_OUT":"\xc3\xa9","model_name":"echo_text","model_version":"1"}'


_LATER_INPUT_WRONG = {"name": "INPUT1", "shape": "x", "datatype": "FP32", "data": [1]}
_NO_DATA = (
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    "'shared_memory_region' in 'parameters'. But no field is set"
)


@pytest.mark.parametrize(
    ("first_input", "status", "error"),
    [
        (5, 400, _NO_DATA),
        ({"name": 5, "shape": "x", "datatype": 5}, 400, _NO_DATA),
        (
            {"name": None, "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            500,
            "Unable to parse 'name': attempt to access JSON non-string as string",
        ),
        (
            {"name": "INPUT0", "shape": "x", "datatype": 5, "data": [1]},
            500,
            "Unable to parse 'datatype': attempt to access JSON non-string as string",
        ),
        (
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": "x"},
            500,
            "Unable to parse 'data': attempt to access JSON non-array as array",
        ),
        (
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, "a", 3, 4, 5]},
            500,
            "Unable to parse 'data': attempt to access JSON non-number as double",
        ),
        (
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4, "a"]},
            500,
            "Unable to parse 'data': Shape does not match true shape of 'data' field",
        ),
        (
            {"name": "INPUT0", "shape": [4], "datatype": "FP16", "data": [1, 2, 3, 4]},
            400,
            "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0",
        ),
        (  # no data is read for an empty tensor: the next input's error is the one named
            {"name": "INPUT0", "shape": [0], "datatype": "FP16", "data": "x"},
            500,
            "Unable to parse 'shape': attempt to access JSON non-array as array",
        ),
    ],
)
def test_each_input_is_read_whole_data_included_before_the_next_as_in_triton(
    server: ServerProcess, first_input: Any, status: int, error: str
) -> None:
    response = _post(server, "add_sub/infer", {"inputs": [first_input, _LATER_INPUT_WRONG]})
    assert (response.status_code, response.json()) == (status, {"error": error})


def test_parameters_that_are_not_an_object(server: ServerProcess) -> None:
    request = _post(server, "add_sub/infer", {"inputs": A4, "parameters": None})
    assert (request.status_code, request.json()) == (
        500,
        {"error": "failed to get request params.: attempt to get members for non-object"},
    )
    ignored = [{**A4[0], "parameters": 5}, A4[1]]
    answered = _post(server, "add_sub/infer", {"inputs": ignored, "outputs": [{"name": "OUTPUT0", "parameters": [1]}]})
    assert answered.status_code == 200
    assert answered.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_a_datatype_triton_does_not_know_is_named_invalid_by_the_models_check(server: ServerProcess) -> None:
    inputs = [{"name": "INPUT0", "shape": [0], "datatype": "XYZ", "data": []}, A4[1]]
    response = _post(server, "add_sub/infer", {"inputs": inputs})
    error = (
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is '<invalid>', but model 'add_sub' "
        "expects 'FP32'"
    )
    assert (response.status_code, response.json()) == (400, {"error": error})


@pytest.mark.parametrize(
    ("shape", "data", "status", "error"),
    [
        (
            [2],
            ["a"],
            400,
            "[request id: <id_unknown>] expected 2 string elements for inference input 'S' for model "
            "'echo_text', got 1",
        ),
        (
            [1],
            ["a", "b"],
            400,
            "[request id: <id_unknown>] unexpected number of string elements 2 for inference "
            "input 'S' for model 'echo_text', expecting 1",
        ),
        ([1], ["a", 5], 500, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    ],
)
def test_json_strings_are_counted_as_triton_counts_them(
    server: ServerProcess, shape: list[int], data: list[Any], status: int, error: str
) -> None:
    response = _post(
        server, "echo_text/infer", {"inputs": [{"name": "S", "shape": shape, "datatype": "BYTES", "data": data}]}
    )
    assert (response.status_code, response.json()) == (status, {"error": error})


def test_bytes_that_are_not_utf8_are_written_as_they_are(server: ServerProcess) -> None:
    """Triton writes a BYTES output's bytes into JSON unchanged, valid UTF-8 or not (tritonclient then
    asks for binary data); they are never replaced."""
    body = b'{"inputs":[{"name":"S","shape":[2],"datatype":"BYTES","data":["\xff\\u0000z","\xe9"]}]}'
    answer = httpx.post(f"http://{server.http_url}/v2/models/echo_text/infer", content=body, timeout=30)
    assert answer.status_code == 200
    assert answer.content.endswith(b'"data":["\xff\\u0000z","\xe9"]}]}')


def test_half_a_surrogate_pair_in_text_is_refused_in_rapidjsons_words(server: ServerProcess) -> None:
    body = b'{"inputs":[{"name":"S","shape":[1],"datatype":"BYTES","data":["\\ud800"]}]}'
    answer = httpx.post(f"http://{server.http_url}/v2/models/echo_text/infer", content=body, timeout=30)
    assert (answer.status_code, answer.json()) == (
        500,
        {"error": "failed to parse the request JSON buffer: The surrogate pair in string is invalid."},
    )


@pytest.mark.parametrize(("first", "second", "binary"), [(True, False, True), (False, True, False), (True, None, True)])
def test_an_output_listed_twice_is_written_as_its_first_listing_asks(
    server: ServerProcess, first: bool, second: bool | None, binary: bool
) -> None:
    listings = [{"name": "OUTPUT0", "parameters": {"binary_data": first}}, {"name": "OUTPUT0"}]
    if second is not None:
        listings[1]["parameters"] = {"binary_data": second}
    answer = _post(server, "add_sub/infer", {"inputs": A4, "outputs": listings})
    assert answer.status_code == 200
    assert ("inference-header-content-length" in answer.headers) is binary
    header = answer.content[: int(answer.headers.get("inference-header-content-length", len(answer.content)))]
    (output,) = json.loads(header)["outputs"]
    assert output.get("parameters") == ({"binary_data_size": 16} if binary else None)


def test_binary_outputs_of_no_bytes_are_answered_as_plain_json(server: ServerProcess) -> None:
    body = {
        "inputs": [{"name": "S", "shape": [0], "datatype": "BYTES", "data": []}],
        "outputs": [{"name": "S_OUT", "parameters": {"binary_data": True}}],
    }
    answer = _post(server, "echo_text/infer", body)
    assert (answer.status_code, answer.headers["content-type"]) == (200, "application/json")
    assert "inference-header-content-length" not in answer.headers
    assert answer.json()["outputs"] == [
        {"name": "S_OUT", "datatype": "BYTES", "shape": [0], "parameters": {"binary_data_size": 0}}
    ]


def test_a_nul_byte_ends_the_json_text_as_in_tritons_parser(server: ServerProcess) -> None:
    url = f"http://{server.http_url}/v2/models/add_sub/infer"
    header = json.dumps({"inputs": A4}).encode()
    assert httpx.post(url, content=header + b"\x00anything", timeout=30).status_code == 200
    # binary data without its Inference-Header-Content-Length: the whole body is the JSON text
    binary = [{**A4[0], "parameters": {"binary_data_size": 16}}, A4[1]]
    del binary[0]["data"]
    data = np.arange(4, dtype=np.float32).tobytes()  # starts with a NUL byte
    refused = httpx.post(url, content=json.dumps({"inputs": binary}).encode() + data, timeout=30)
    assert (refused.status_code, refused.json()) == (
        400,
        {"error": "unexpected size for input 'INPUT0', expecting 16 additional bytes for model 'add_sub'"},
    )


def test_data_of_an_input_shaped_as_a_scalar_is_not_read(server: ServerProcess) -> None:
    """Triton counts no elements in shape ``[]``, so it never reads ``data``: the shape is what is wrong."""
    for data in (1.0, [1.0], [1.0, 2.0]):
        body = {"inputs": [{"name": "S", "shape": [], "datatype": "BYTES", "data": data}]}
        answer = _post(server, "echo_text/infer", body)
        assert (answer.status_code, answer.json()) == (
            400,
            {
                "error": "[request id: <id_unknown>] unexpected shape for input 'S' for model 'echo_text'. "
                "Expected [-1], got []. "
            },
        )
