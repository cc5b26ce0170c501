"""A model's exception reported as Triton 2.51's python backend reports it, over every protocol.

The expected texts are what a real Triton 2.51 answered for the same model files: the exception's
type and message, then an ``At:`` block with a ``  <file>(<line>): <function>`` line per frame, from
the one that raised outward, ending with the model's outermost frame. ``{dir}`` is the model's version
directory. Every test runs twice: with the models in the server process and in worker processes.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ThreadedServer, serve_in_thread

from .models import INITIALIZE_FAILS_DEEP, TRACEBACKS, TRACEBACKS_DECOUPLED, isolated, write_model

FAILED = "Failed to process the request(s) for model '{}_0', message: "
REPORTS = {
    "raise": "RuntimeError: model exploded\n\nAt:\n  {dir}/model.py(24): execute\n",
    "nested": (
        "ValueError: negative value -1\n\nAt:\n"
        "  {dir}/helpers.py(3): check\n"
        "  {dir}/model.py(7): convert\n"
        "  {dir}/model.py(14): execute\n"
    ),
    # the exception raised last, without its cause
    "chained": "RuntimeError: could not convert\n\nAt:\n  {dir}/model.py(19): execute\n",
    "empty": "RuntimeError: <EMPTY MESSAGE>\n\nAt:\n  {dir}/model.py(21): execute\n",
    "multiline": "ValueError: first line\nsecond line\n\nAt:\n  {dir}/model.py(23): execute\n",
}
INITIALIZE_REPORT = (
    "RuntimeError: no weights in weights.bin\n\nAt:\n"
    "  {dir}/model.py(2): load_weights\n"
    "  {dir}/model.py(7): initialize\n"
)


@pytest.fixture(scope="module", params=["thread", "process"])
def repo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # resolved: naiad reports the resolved repository path, Triton the one it was given
    path: Path = tmp_path_factory.mktemp("models").resolve()
    for name, spec in {
        "tracebacks": TRACEBACKS,
        "tracebacks_decoupled": TRACEBACKS_DECOUPLED,
        "initialize_fails": INITIALIZE_FAILS_DEEP,
    }.items():
        write_model(path, name, isolated(spec, request.param))
    return path


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[ThreadedServer]:
    loaded = ("tracebacks", "tracebacks_decoupled")
    with serve_in_thread([repo], model_control_mode="explicit", load_models=loaded) as running:
        yield running


def _expected(repo: Path, model: str, report: str) -> str:
    return FAILED.format(model) + report.format(dir=repo / model / "1")


def _input(module: Any) -> Any:
    tensor = module.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    return tensor


@pytest.mark.parametrize("mode", list(REPORTS))
def test_http_infer(server: ThreadedServer, repo: Path, mode: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException) as caught:
            client.infer("tracebacks", [_input(httpclient)], parameters={"mode": mode})
    finally:
        client.close()
    assert caught.value.message() == _expected(repo, "tracebacks", REPORTS[mode])


@pytest.mark.parametrize("mode", list(REPORTS))
def test_grpc_infer(server: ThreadedServer, repo: Path, mode: str) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as caught:
            client.infer("tracebacks", [_input(grpcclient)], parameters={"mode": mode})
    finally:
        client.close()
    assert caught.value.status() == "StatusCode.INTERNAL"
    assert caught.value.message() == _expected(repo, "tracebacks", REPORTS[mode])


@pytest.mark.parametrize("model", ["tracebacks", "tracebacks_decoupled"])
@pytest.mark.parametrize("mode", ["raise", "nested"])
def test_grpc_stream(server: ThreadedServer, repo: Path, model: str, mode: str) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    errors: queue.Queue[InferenceServerException | None] = queue.Queue()
    client.start_stream(callback=lambda result, error: errors.put(error))
    try:
        client.async_stream_infer(model, [_input(grpcclient)], parameters={"mode": mode})
        error = errors.get(timeout=30)
    finally:
        client.stop_stream()
        client.close()
    assert error is not None
    assert error.message() == _expected(repo, model, REPORTS[mode])


@pytest.mark.parametrize("path", ["generate", "generate_stream"])
def test_http_generate(server: ThreadedServer, repo: Path, path: str) -> None:
    # no "mode" parameter: the model raises "model exploded"
    answer = httpx.post(f"http://{server.http_url}/v2/models/tracebacks/{path}", json={"INPUT0": [1.0]}, timeout=30)
    body = answer.text.removeprefix("data: ") if path == "generate_stream" else answer.text
    assert json.loads(body)["error"] == _expected(repo, "tracebacks", REPORTS["raise"])


def test_exception_in_initialize_fails_the_load(server: ThreadedServer, repo: Path) -> None:
    report = INITIALIZE_REPORT.format(dir=repo / "initialize_fails" / "1")
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException) as caught:
            client.load_model("initialize_fails")
        index = {entry["name"]: entry for entry in client.get_model_repository_index()}
    finally:
        client.close()
    # Triton's reason starts with its status code, as Status::AsString writes it
    assert caught.value.message() == (
        f"load failed for model 'initialize_fails': version 1 is at UNAVAILABLE state: Internal: {report};\n"
    )
    assert index["initialize_fails"]["reason"] == f"Internal: {report}"
