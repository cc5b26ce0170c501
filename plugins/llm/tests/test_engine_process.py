"""The engine in a process of its own (the transformers engine's default): served as in the server
process, restarted when it dies, gone when the server is; ``"engine_process": false`` keeps it in."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, start_server
from naiad_llm.engine import GenerationOutput
from naiad_llm.engines.process import merge
from naiad_llm.engines.process_wire import Frames, frame, output_fields, output_from
from naiad_llm.testing import write_model_repository

ISOLATED, IN_PROCESS, MISCONFIGURED, MISSING = "isolated", "in_process", "misconfigured", "missing"
ENGINE_MODULE = "naiad_llm.engines.process_child"


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = tmp_path_factory.mktemp("engine-process")
    write_model_repository(repository, ISOLATED, tiny_model)
    write_model_repository(repository, IN_PROCESS, tiny_model, engine_process=False)
    write_model_repository(repository, MISCONFIGURED, tiny_model, engine_process="yes")
    write_model_repository(repository, MISSING, tiny_model.parent / "no-such-model")
    process = start_server([repository], timeout=180)
    yield process
    process.stop()


def engine_processes(parent: int) -> list[int]:
    """The pids of the engine processes ``parent`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent_pid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if parent_pid == parent and ENGINE_MODULE.encode() in command:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def generate(server: ServerProcess, model: str, **body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/{model}/generate",
        data=json.dumps({"text_input": "Hello there", "max_tokens": 4, "ignore_eos": True, **body}).encode(),
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stream_request(client: grpcclient.InferenceServerClient, model: str, max_tokens: int) -> None:
    values = {
        "text_input": (np.array([b"Hello"], dtype=np.object_), "BYTES"),
        "sampling_parameters": (
            np.array([json.dumps({"max_tokens": max_tokens, "ignore_eos": True}).encode()], dtype=np.object_),
            "BYTES",
        ),
        "stream": (np.array([True]), "BOOL"),
    }
    inputs = []
    for name, (data, datatype) in values.items():
        tensor = grpcclient.InferInput(name, list(data.shape), datatype)
        tensor.set_data_from_numpy(data)
        inputs.append(tensor)
    client.async_stream_infer(model, inputs)


def test_the_transformers_engine_runs_in_a_child_of_the_server(server: ServerProcess) -> None:
    # The isolated model's; the in-process model has none, and the missing model's ended with its load.
    (child,) = engine_processes(server.process.pid)
    assert os.getsid(child) != os.getsid(server.process.pid)  # Ctrl+C in a terminal reaches the server only
    for model in (ISOLATED, IN_PROCESS):
        status, document = generate(server, model, return_num_output_tokens=True)
        assert status == 200, document
        assert document["num_output_tokens"] == 4


def test_both_placements_give_the_same_greedy_text(server: ServerProcess) -> None:
    texts = {
        model: generate(server, model, temperature=0, max_tokens=12)[1]["text_output"]
        for model in (ISOLATED, IN_PROCESS)
    }
    assert texts[ISOLATED] == texts[IN_PROCESS]


def index_entry(server: ServerProcess, model: str) -> dict[str, str]:
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/index", data=b"{}")
    with urllib.request.urlopen(request, timeout=30) as response:
        index = json.loads(response.read())
    entry: dict[str, str] = next(entry for entry in index if entry["name"] == model)
    return entry


def test_a_non_boolean_engine_process_fails_the_load_naming_the_key(server: ServerProcess) -> None:
    entry = index_entry(server, MISCONFIGURED)
    assert entry["state"] == "UNAVAILABLE"
    assert '"engine_process" must be true or false' in entry["reason"]


def test_an_engine_that_cannot_start_in_its_process_fails_the_load_with_its_error(server: ServerProcess) -> None:
    entry = index_entry(server, MISSING)
    assert entry["state"] == "UNAVAILABLE"
    assert f"model '{MISSING}': transformers could not load" in entry["reason"]
    assert "no-such-model" in entry["reason"]


def test_an_engine_process_that_dies_fails_its_requests_and_is_restarted(server: ServerProcess) -> None:
    (pid,) = engine_processes(server.process.pid)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put(error or result))
    try:
        stream_request(client, ISOLATED, 400)
        assert not isinstance(results.get(timeout=60), Exception)  # generating
        os.kill(pid, signal.SIGKILL)
        while not isinstance(result := results.get(timeout=60), Exception):
            pass  # tokens generated before the kill
        assert isinstance(result, InferenceServerException)
        assert f"model '{ISOLATED}'" in str(result)
        assert "engine process died" in str(result)
    finally:
        client.stop_stream()
        client.close()
    status, document = generate(server, IN_PROCESS)  # the other model never noticed
    assert status == 200, document
    deadline = time.monotonic() + 120
    while (answer := generate(server, ISOLATED))[0] != 200:
        assert answer[0] == 503, answer
        assert "restarting" in answer[1]["error"]
        assert time.monotonic() < deadline, "the engine process did not come back"
        time.sleep(0.2)
    (restarted,) = engine_processes(server.process.pid)
    assert restarted != pid


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_no_engine_process_outlives_its_server(tiny_model: Path, tmp_path: Path, stop: str) -> None:
    write_model_repository(tmp_path, ISOLATED, tiny_model)
    server = start_server([tmp_path], timeout=180)
    try:
        (pid,) = engine_processes(server.process.pid)
        server.stop(sig=signal.Signals[stop])
        deadline = time.monotonic() + 60
        while alive(pid):
            assert time.monotonic() < deadline, f"the engine process outlived its server ({stop})"
            time.sleep(0.1)
    finally:
        server.stop()


def test_outputs_that_wait_merge_into_one() -> None:
    first = GenerationOutput("Hel", [1, 2], 5, 2, logprobs=[{1: -0.1}, {2: -0.2}])
    second = GenerationOutput("lo", [3], 5, 3, finished=True, finish_reason="length", logprobs=[{3: -0.3}])
    merged = merge(first, second)
    assert (merged.text, list(merged.token_ids), merged.num_output_tokens) == ("Hello", [1, 2, 3], 3)
    assert (merged.finished, merged.finish_reason) == (True, "length")
    assert merged.logprobs == [{1: -0.1}, {2: -0.2}, {3: -0.3}]


def test_an_output_crosses_the_socket_with_every_field() -> None:
    output = GenerationOutput(
        "lo", [3, 4], 5, 4, finished=True, finish_reason="stop", cumulative_logprob=-0.5, logprobs=[{3: -0.3}]
    )
    fields = output_fields(output)
    assert len(fields) == len(dataclasses.fields(GenerationOutput))  # a field added later must be sent too
    (received,) = Frames().feed(frame(("outputs", [("id", fields)], None)))[0][1]
    assert received[0] == "id"
    assert output_from(received[1]) == output
