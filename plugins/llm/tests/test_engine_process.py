"""The engine in a process of its own (the transformers engine's default): served as in the server
process, restarted when it dies, gone when the server is; ``"engine_process": false`` keeps it in."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, start_server
from naiad_llm.engine import GenerationOutput, GenerationRequest, SamplingSettings
from naiad_llm.engines import EngineSettings
from naiad_llm.engines.process import EngineProcess, engine_cpus, merge
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


def test_the_engine_process_keeps_off_the_first_cpu_the_server_may_use(server: ServerProcess) -> None:
    (child,) = engine_processes(server.process.pid)
    cpus = sorted(os.sched_getaffinity(server.process.pid))
    bound = len(cpus) > 1 and "OMP_NUM_THREADS" not in os.environ  # else the placement is left alone
    expected = set(cpus[1:]) if bound else set(cpus)
    threads = [int(thread.name) for thread in (Path("/proc") / str(child) / "task").iterdir()]
    assert len(threads) > 1  # the engine's own threads (its generation thread) are among them
    for thread in threads:
        assert os.sched_getaffinity(thread) == expected, f"thread {thread} of the engine process"


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
        assert answer[0] == 400, answer  # generate answers any failed response 400, as Triton does
        assert "restarting" in answer[1]["error"]
        assert time.monotonic() < deadline, "the engine process did not come back"
        time.sleep(0.2)
    (restarted,) = engine_processes(server.process.pid)
    assert restarted != pid


def set_log_verbose_level(server: ServerProcess, level: int) -> None:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/logging", data=json.dumps({"log_verbose_level": level}).encode()
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["log_verbose_level"] == level


def test_the_engine_process_logs_at_the_level_v2_logging_sets(server: ServerProcess) -> None:
    joins = f"model '{ISOLATED}': request {ISOLATED}-"
    assert generate(server, ISOLATED)[0] == 200
    assert joins not in server.logs()  # debug lines are off
    set_log_verbose_level(server, 1)
    try:
        assert generate(server, ISOLATED)[0] == 200
        deadline = time.monotonic() + 30
        while joins not in server.logs():  # the child's lines reach the server's log as they come
            assert time.monotonic() < deadline, "the engine process's debug line never reached the log"
            time.sleep(0.1)
    finally:
        set_log_verbose_level(server, 0)


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


LONG_GREEDY = SamplingSettings(max_tokens=400, temperature=0, ignore_eos=True)


def tiny_settings(tiny_model: Path) -> EngineSettings:
    return EngineSettings("tiny", str(tiny_model), {"model": str(tiny_model)}, tiny_model)


@contextlib.asynccontextmanager
async def engine_process(tiny_model: Path) -> AsyncIterator[EngineProcess]:
    """The tiny model's transformers engine in a process of its own, started and, after, stopped."""
    engine = EngineProcess("transformers", tiny_settings(tiny_model))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


class EngineChildConnection:
    """The server's end of an engine process started by hand: messages written and read as the server does."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = Frames()
        self.messages: list[Any] = []

    def send(self, message: Any) -> None:
        self.sock.sendall(frame(message))

    def receive(self, kind: str) -> Any:
        """The next message of ``kind`` (logs skipped)."""
        while True:
            while not self.messages:
                data = self.sock.recv(1 << 20)
                assert data, "the engine process closed its socket"
                self.messages.extend(self.frames.feed(data))
            message = self.messages.pop(0)
            if message[0] == kind:
                return message
            assert message[0] == "log", message


def test_the_first_output_of_a_request_leads_the_message_it_travels_in(tiny_model: Path) -> None:
    ours, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-m", ENGINE_MODULE, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    ours.settimeout(120)
    connection = EngineChildConnection(ours)
    try:
        connection.send(("start", "transformers", tiny_settings(tiny_model), logging.WARNING))
        connection.receive("ready")
        connection.send(("add", GenerationRequest("streaming", "Once upon a time", LONG_GREEDY)))
        seen = {"streaming"}
        while not connection.receive("outputs")[1]:
            pass  # the long request streams
        mixed = 0  # messages carrying first outputs and later ones, over a few rounds of new requests
        for round_ in range(3):
            new = {f"new-{round_}-{index}" for index in range(4)}
            for request_id in sorted(new):
                connection.send(
                    ("add", GenerationRequest(request_id, "Hello", dataclasses.replace(LONG_GREEDY, max_tokens=3)))
                )
            finished: set[str] = set()
            while finished != new:
                _, outputs, _ = connection.receive("outputs")
                firsts = [request_id not in seen for request_id, _ in outputs]
                assert firsts == sorted(firsts, reverse=True), f"a first output after a later one: {outputs}"
                mixed += any(firsts) and not all(firsts)
                seen.update(request_id for request_id, _ in outputs)
                finished.update(request_id for request_id, fields in outputs if output_from(fields).finished)
            if mixed:
                break
        assert mixed, "no message carried a new request's first output with a streaming request's token"
        connection.send(("stop",))
        assert child.wait(60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        ours.close()


def test_the_engine_process_hears_of_a_request_when_asked_and_a_closed_one_leaves_its_batch(tiny_model: Path) -> None:
    async def scenario() -> None:
        async with engine_process(tiny_model) as engine:
            generation = engine.generate(GenerationRequest("never-iterated", "Once upon a time", LONG_GREEDY))
            await wait_for(lambda: engine.stats().running == 1)  # generating, though nobody iterates yet
            await generation.aclose()  # type: ignore[attr-defined]
            await wait_for(lambda: engine.stats().running == 0)

    async def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, "the engine's load did not change"
            await asyncio.sleep(0.01)

    asyncio.run(scenario())


def test_an_aborted_engine_process_request_ends_at_once_with_an_abort_output(tiny_model: Path) -> None:
    async def scenario() -> None:
        async with engine_process(tiny_model) as engine:
            generation = engine.generate(GenerationRequest("aborted", "Once upon a time", LONG_GREEDY))
            assert not (await anext(generation)).finished
            await engine.abort("aborted")
            while not (output := await asyncio.wait_for(anext(generation), 10)).finished:
                pass  # outputs the child sent before it heard of the abort
            assert output.finish_reason == "abort"

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("device", "cpus", "omp", "expected"),
    [
        ("cpu", {0, 1, 2, 3}, None, [1, 2, 3]),
        ("cpu", {2, 5, 7}, None, [5, 7]),  # a container's CPUs: all but the first of them
        ("cpu", {0}, None, None),  # one CPU: nothing to leave the server
        ("cpu", {0, 1, 2, 3}, "2", None),  # OMP_NUM_THREADS set: threads and placement are the user's
        ("cuda:0", {0, 1, 2, 3}, None, None),
    ],
)
def test_the_engine_process_cpus(
    monkeypatch: pytest.MonkeyPatch, device: str, cpus: set[int], omp: str | None, expected: list[int] | None
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cpus)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert engine_cpus(device) == expected
