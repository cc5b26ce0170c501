"""The logging extension over HTTP and gRPC, JSON-lines logs that name model and version, escaped client strings."""

from __future__ import annotations

import json
import logging
import queue
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from grpc import RpcError, StatusCode
from grpc import insecure_channel as grpc_channel
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.errors import ErrorCode, NaiadError
from naiad.logs import LogControl, LogSettings, Trusted, escape, formatter, model_context
from naiad.testing import ModelRepositoryBuilder, ServerProcess

from .conftest import ADD_SUB, ADD_SUB_CONFIG, STREAM, STREAM_CONFIG, eventually

DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}


def _record(message: str, *args: object, level: int = logging.INFO, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("naiad.test", level, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_client_strings_cannot_break_a_line() -> None:
    assert escape("a\nb\r\x1b[31m\u2028\\") == "a\\x0ab\\x0d\\x1b[31m\\u2028\\\\"
    plain = formatter("default")
    line = plain.format(_record("unknown model '%s'", "m\n2025-01-01 00:00:00.000 I naiad.server] forged"))
    assert "\n" not in line
    assert "\\x0a2025-01-01" in line
    assert plain.format(_record("models:\n%s", Trusted("a\nb"))).endswith("models:\na\nb")
    assert "\n" not in plain.format(_record("f-string with\na newline"))


def test_formats_and_model_context() -> None:
    with model_context("add_sub", 3):
        plain = formatter("default").format(_record("loading"))
        iso = formatter("ISO8601").format(_record("model 'add_sub' version 3 is ready"))
        entry = json.loads(formatter("json").format(_record("loading %s", "x\ny", level=logging.WARNING)))
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} I naiad\.test\] loading \[model 'add_sub' version 3\]", plain
    )
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z I naiad\.test\] model 'add_sub' version 3 is ready", iso
    )
    assert set(entry) == {"time", "level", "logger", "message", "model", "version"}
    assert (entry["level"], entry["logger"], entry["message"]) == ("WARNING", "naiad.test", "loading x\\x0ay")
    assert (entry["model"], entry["version"]) == ("add_sub", "3")
    explicit = json.loads(formatter("json").format(_record("m", model="other", version=2)))
    assert (explicit["model"], explicit["version"]) == ("other", "2")
    assert "model" not in json.loads(formatter("json").format(_record("no model here")))


def test_log_control_updates_like_triton() -> None:
    control = LogControl()
    assert control.to_json() == DEFAULTS
    updated = control.update({"log_verbose_level": 2, "log_info": False, "log_format": "ISO8601", "unknown": 1})
    assert updated == {**DEFAULTS, "log_verbose_level": 2, "log_info": False, "log_format": "ISO8601"}
    for changes, code, message in (
        ({"log_file": "/tmp/elsewhere"}, ErrorCode.UNSUPPORTED, "log file location can not be updated"),
        ({"log_file": ""}, ErrorCode.UNSUPPORTED, "log file location can not be updated"),
        ({"log_info": "yes"}, ErrorCode.INVALID_ARG, "expect boolean for 'log_info'"),
        ({"log_verbose_level": -1}, ErrorCode.INVALID_ARG, "expect unsigned integer"),
        ({"log_verbose_level": True}, ErrorCode.INVALID_ARG, "expect unsigned integer"),
        ({"log_format": "xml"}, ErrorCode.INVALID_ARG, "invalid argument for log_format, got: xml"),
        ({"log_error": False, "log_warning": None}, ErrorCode.INVALID_ARG, "expect boolean for 'log_warning'"),
    ):
        with pytest.raises(NaiadError, match=re.escape(message)) as caught:
            control.update(changes)
        assert caught.value.code is code
    assert control.to_json()["log_error"] is True  # a refused update changes nothing


def test_switches_are_independent_and_the_format_changes_at_run_time(tmp_path: Path) -> None:
    log_file = tmp_path / "naiad.log"
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    control = LogControl(LogSettings(file=str(log_file)))
    try:
        control.install()
        logger = logging.getLogger("naiad.switches")
        control.update({"log_info": False})
        logger.info("hidden info")
        logger.error("shown error")
        control.update({"log_info": True, "log_error": False, "log_format": "json"})
        logger.error("hidden error")
        logger.info("shown info")
        logger.debug("hidden debug")
        control.update({"log_verbose_level": 1})
        logger.debug("shown debug")
    finally:
        control.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = log_file.read_text().splitlines()
    assert len(lines) == 3
    assert lines[0].endswith("E naiad.switches] shown error")
    assert json.loads(lines[1])["message"] == "shown info"
    assert json.loads(lines[2])["level"] == "DEBUG"


def _post(url: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_logging_extension_over_http_and_grpc(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model("m", ADD_SUB, ADD_SUB_CONFIG.format(max_batch_size=0, extra=""))
    server = naiad_server(model_repository.root)
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.get_log_settings() == DEFAULTS
    assert http.update_log_settings({"log_verbose_level": 1}) == {**DEFAULTS, "log_verbose_level": 1}
    url = f"http://{server.http_url}/v2/logging"
    assert _post(url, b'{"log_file": "/tmp/anywhere"}') == (
        501,
        {"error": "log file location can not be updated through network protocol"},
    )
    for body, status, error in (  # as Triton 2.51 answers them
        (b'{"log_info": "yes"}', 500, "attempt to access JSON non-boolean as boolean"),
        (b'{"log_verbose_level": 1.5}', 500, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
        (b'{"log_format": 5}', 500, "attempt to access JSON non-string as string"),
        (b'{"log_format": "weird"}', 503, "invalid argument for --log_format, got: weird"),
        (b"not json", 500, "failed to parse the request JSON buffer: Invalid value. at 1"),
    ):
        assert _post(url, body) == (status, {"error": error})
    assert _post(url, b"[]") == (200, {**DEFAULTS, "log_verbose_level": 1})  # not an object: no changes
    nulls = b'{"log_info": null, "log_verbose_level": null, "log_format": null, "log_file": null, "log_error": false}'
    assert _post(url, nulls) == (200, {**DEFAULTS, "log_verbose_level": 1, "log_error": False})  # null: unchanged
    assert _post(url, b'{"log_error": true}') == (200, {**DEFAULTS, "log_verbose_level": 1})
    assert _post(url, b"{}") == (200, {**DEFAULTS, "log_verbose_level": 1})
    assert "logging" in http.get_server_metadata()["extensions"]

    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    settings = grpc.get_log_settings(as_json=True)["settings"]
    assert settings["log_verbose_level"] == {"uint32_param": 1}
    assert settings["log_format"] == {"string_param": "default"}
    assert settings["log_info"] == {"bool_param": True}
    assert settings["log_file"] == {"string_param": ""}
    updated = grpc.update_log_settings({"log_verbose_level": 0, "log_warning": False}, as_json=True)["settings"]
    assert updated["log_verbose_level"] == {"uint32_param": 0}
    assert updated["log_warning"] == {"bool_param": False}
    with pytest.raises(InferenceServerException) as refused:
        grpc.update_log_settings({"log_file": "/tmp/anywhere"})
    assert refused.value.status() == "StatusCode.UNIMPLEMENTED"
    with pytest.raises(InferenceServerException) as wrong:
        grpc.update_log_settings({"log_info": None})  # a setting with no value
    assert wrong.value.status() == "StatusCode.INVALID_ARGUMENT"
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc_channel(server.grpc_url))
    request = service_pb2.LogSettingsRequest()
    request.settings["log_verbose_level"].bool_param = True
    with pytest.raises(RpcError) as not_a_number:
        stub.LogSettings(request, timeout=30)
    assert (not_a_number.value.code(), not_a_number.value.details()) == (
        StatusCode.INVALID_ARGUMENT,
        "expect int32 for 'log_verbose_level'",  # Triton's gRPC words
    )
    assert http.get_log_settings()["log_warning"] is False


def _stream(server: ServerProcess, request_id: str) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put(result or error))
    count = grpcclient.InferInput("IN", [1], "INT32")
    count.set_data_from_numpy(np.array([1], dtype=np.int32))
    client.async_stream_infer("stream", [count], request_id=request_id)
    answers.get(timeout=30)
    client.stop_stream()


def test_json_lines_name_model_and_version(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    model_repository.add_python_model("stream", STREAM, STREAM_CONFIG)
    model_repository.add_python_model(
        "batched",
        ADD_SUB,
        ADD_SUB_CONFIG.format(max_batch_size=8, extra="dynamic_batching { max_queue_delay_microseconds: 1000 }"),
    )
    log_file = tmp_path / "server.log"
    server = naiad_server(
        model_repository.root, args=("--log-format=json", f"--log-file={log_file}", "--log-verbose=1")
    )
    _stream(server, 'abc\n{"forged": true}')
    inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    httpclient.InferenceServerClient(server.http_url).infer("batched", inputs)

    def entries() -> list[dict[str, Any]]:
        return [json.loads(line) for line in log_file.read_text().splitlines()]

    eventually(lambda: any("executing a batch" in entry["message"] for entry in entries()))
    parsed = entries()  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in parsed)
    assert not any(entry.get("forged") for entry in parsed)
    (model_line,) = [entry for entry in parsed if entry["message"].startswith("streaming for request")]
    assert model_line["message"] == 'streaming for request abc\\x0a{"forged": true}'
    assert (model_line["model"], model_line["version"]) == ("stream", "1")
    loading = [entry for entry in parsed if entry["message"].startswith("loading model 'stream'")]
    assert loading
    assert loading[0]["model"] == "stream"
    batches = [entry for entry in parsed if "executing a batch" in entry["message"]]
    assert all((entry["model"], entry["version"]) == ("batched", "1") for entry in batches)
    assert server.logs() == ""  # everything went to --log-file


def test_plain_lines_name_model_and_version(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model("stream", STREAM, STREAM_CONFIG)
    server = naiad_server(model_repository.root)
    _stream(server, "abc\n2030-01-01 00:00:00.000 I naiad.server] forged")
    eventually(lambda: "streaming for request" in server.logs())
    lines = server.logs().splitlines()
    (line,) = [line for line in lines if "streaming for request" in line]
    assert line.endswith(
        "streaming for request abc\\x0a2030-01-01 00:00:00.000 I naiad.server] forged [model 'stream' version 1]"
    )
    assert not any(line.startswith("2030-01-01") for line in lines)


def test_bad_log_flags_are_refused(tmp_path: Path) -> None:
    import subprocess

    for flags, message in (
        (["--log-format=xml"], "unknown log format 'xml'"),
        (["--log-file=/nonexistent/dir/naiad.log"], "cannot open --log-file"),
        (["--metrics-config=bogus=1"], "unknown --metrics-config key 'bogus'"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "naiad", "serve", f"--model-repository={tmp_path}", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
