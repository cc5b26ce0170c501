"""Python models in worker processes (``INSTANCE_ISOLATION: "process"``): results, faults, restarts.

One server serves the models of this module; faults are caused by the models themselves, on request
(an input selects what ``execute`` does), so each test leaves the server as it found it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, serve_in_thread, start_server
from naiad_python.isolation import forked
from naiad_python.isolation import instance as isolated_instance

PROCESS = 'parameters { key: "INSTANCE_ISOLATION" value: { string_value: "process" } }'

# ACTION selects what execute does: 0 answer, 1 SIGKILL itself, 2 segfault, 3 os._exit, 4 busy loop (3 s),
# 5 hang (60 s).
FAULTY = """
import ctypes
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pid = os.getpid()

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            action = int(pb_utils.get_input_tensor_by_name(request, "ACTION").as_numpy()[0])
            if action == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            elif action == 2:
                ctypes.string_at(0)
            elif action == 3:
                os._exit(3)
            elif action == 4:
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    pass
            elif action == 5:
                time.sleep(60)
            pid = pb_utils.Tensor("PID", np.array([self.pid], dtype=np.int64))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data * 2), pid]))
        return responses
"""

FAULTY_CONFIG = f"""
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}, {{ name: "ACTION" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}, {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }} ]
{PROCESS}
"""

ADD_SUB = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out = [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
            responses.append(pb_utils.InferenceResponse(out, parameters={"seen": request.request_id()}))
        return responses
"""

ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
"""

REPEAT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            words = pb_utils.get_input_tensor_by_name(request, "WORDS").as_numpy()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            for index in range(count):
                if request.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", words[index % len(words):][:1])]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

REPEAT_CONFIG = f"""
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "WORDS" data_type: TYPE_STRING dims: [ -1 ] }}, {{ name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_STRING dims: [ 1 ] }} ]
{PROCESS}
"""

# Streams a response every 10 ms until the request is cancelled, then writes the file MARK names.
UNTIL_CANCELLED = """
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mark = pb_utils.get_input_tensor_by_name(request, "MARK").as_numpy()[0].decode()
            threading.Thread(target=self._stream, args=(request, mark)).start()
        return None

    def _stream(self, request, mark):
        sender = request.get_response_sender()
        deadline = time.monotonic() + 30
        while not request.is_cancelled() and time.monotonic() < deadline:
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TICK", np.array([1], np.int32))]))
            time.sleep(0.01)
        if request.is_cancelled():
            open(mark, "w").close()
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

UNTIL_CANCELLED_CONFIG = f"""
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "MARK" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "TICK" data_type: TYPE_INT32 dims: [ 1 ] }} ]
{PROCESS}
"""

LOGGER = """
import logging
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        pb_utils.Logger.log_warn(f"hello from worker {os.getpid()}\\nsecond line")
        try:
            raise ValueError("the weights are odd")
        except ValueError:
            logging.getLogger("naiad.python.model").exception("checking the weights failed")
        pid = pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))
        return [pb_utils.InferenceResponse([pid]) for _ in requests]
"""

COMPLETES_ITSELF = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        with open(os.path.join(os.path.dirname(__file__), "auto_complete_pid"), "w") as file:
            file.write(str(os.getpid()))
        return config

    def execute(self, requests):
        pid = pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))
        return [pb_utils.InferenceResponse([pid]) for _ in requests]
"""

ARGV = """
import json
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        argv = pb_utils.Tensor("ARGV", np.array([json.dumps(sys.argv)], dtype=np.object_))
        return [pb_utils.InferenceResponse([argv]) for _ in requests]
"""

ARGV_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "ARGV" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

BROKEN_INIT = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("no weights here")
"""

PID_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""

IDENTITY_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


# Kills its own worker while loading, as Triton's QA model init_exit does.
INIT_EXIT = """
import os
import signal


class TritonPythonModel:
    def initialize(self, args):
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("isolation") / "models")
    repository.add_python_model("faulty", FAULTY, FAULTY_CONFIG)
    repository.add_python_model("add_sub_process", ADD_SUB, ADD_SUB_CONFIG + PROCESS)
    repository.add_python_model("add_sub_thread", ADD_SUB, ADD_SUB_CONFIG + PROCESS.replace('"process"', '"thread"'))
    repository.add_python_model("add_sub_wide", ADD_SUB, ADD_SUB_CONFIG.replace("[ 4 ]", "[ -1 ]") + PROCESS)
    repository.add_python_model("repeat", REPEAT, REPEAT_CONFIG)
    repository.add_python_model("broken", BROKEN_INIT, IDENTITY_CONFIG + PROCESS)
    repository.add_python_model("until_cancelled", UNTIL_CANCELLED, UNTIL_CANCELLED_CONFIG)
    repository.add_python_model("logger", LOGGER, PID_CONFIG + PROCESS)
    repository.add_python_model("completes_itself", COMPLETES_ITSELF, PID_CONFIG + PROCESS)
    repository.add_python_model("argv", ARGV, ARGV_CONFIG + PROCESS)
    repository.add_python_model("wrong_mode", BROKEN_INIT, IDENTITY_CONFIG + PROCESS.replace('"process"', '"fork"'))
    repository.add_python_model("init_exit", INIT_EXIT, IDENTITY_CONFIG + PROCESS)
    return repository.root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[ServerProcess]:
    running = start_server([repository])
    yield running
    running.stop()


def _faulty(
    client: httpclient.InferenceServerClient, action: int, timeout_us: int | None = None
) -> httpclient.InferResult:
    data = httpclient.InferInput("INPUT0", [3], "FP32")
    data.set_data_from_numpy(np.array([1, 2, 3], np.float32))
    chosen = httpclient.InferInput("ACTION", [1], "INT32")
    chosen.set_data_from_numpy(np.array([action], np.int32))
    return client.infer("faulty", [data, chosen], timeout=timeout_us)


def _wait_ready(client: httpclient.InferenceServerClient, model: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.is_model_ready(model):
            return
        time.sleep(0.1)
    raise AssertionError(f"model '{model}' did not become ready again within {timeout} s")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_process_instance_answers_like_a_thread_instance(server: ServerProcess, protocol: str) -> None:
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.full((2, 4), 0.5, np.float32)
    answers = []
    for model in ("add_sub_process", "add_sub_thread"):
        tensors = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
        tensors[0].set_data_from_numpy(a)
        tensors[1].set_data_from_numpy(b)
        result = client.infer(model, tensors, request_id="r-7")
        answers.append((result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")))
    np.testing.assert_array_equal(answers[0][0], a + b)
    np.testing.assert_array_equal(answers[0][1], a - b)
    np.testing.assert_array_equal(answers[0][0], answers[1][0])
    client.close()


def test_the_model_runs_in_another_process(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    pid = int(_faulty(client, 0).as_numpy("PID")[0])
    assert pid != server.process.pid
    template = _parent_of(pid)  # forked by the server's template process, itself the server's child
    assert template != server.process.pid
    assert _parent_of(template) == server.process.pid
    client.close()


def test_a_worker_shows_its_model_the_command_line_of_tritons_stub(server: ServerProcess) -> None:
    """``sys.argv`` is ``[""]``, as in Triton: ``unittest.main()`` in a model finds no test names in it."""
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    assert json.loads(client.infer("argv", [tensor]).as_numpy("ARGV")[0]) == [""]
    client.close()


def test_a_batch_wakes_only_the_thread_that_runs_it(server: ServerProcess) -> None:
    """The worker's control thread sleeps through batches: it is not woken each time the server reads
    the end of a batch the worker sent on the control socket (see naiad_python.isolation.channel)."""
    client = httpclient.InferenceServerClient(server.http_url)
    pid = int(_faulty(client, 0).as_numpy("PID")[0])
    before = _wakeups_of_other_threads(pid)
    for _ in range(100):
        _faulty(client, 0)
    assert int(_faulty(client, 0).as_numpy("PID")[0]) == pid
    assert _wakeups_of_other_threads(pid) - before < 20
    client.close()


def _wakeups_of_other_threads(pid: int) -> int:
    """Voluntary context switches so far of every thread of ``pid`` but its main thread."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name != str(pid):
            status = (task / "status").read_text()
            total += int(next(line for line in status.splitlines() if line.startswith("voluntary_ctxt")).split()[1])
    return total


def _parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])


def test_concurrent_requests_are_batched_and_each_gets_its_rows(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=16)
    inputs = [np.full((1, 4), index, np.float32) for index in range(32)]
    pending = []
    for array in inputs:
        tensors = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
        tensors[0].set_data_from_numpy(array)
        tensors[1].set_data_from_numpy(array)
        pending.append(client.async_infer("add_sub_process", tensors))
    for array, request in zip(inputs, pending, strict=True):
        np.testing.assert_array_equal(request.get_result(timeout=60).as_numpy("OUTPUT0"), array * 2)
    client.close()


def test_a_batch_whose_responses_outgrow_their_arena_answers_every_request(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=8)
    inputs = [np.full((1, 150_000), index, np.float32) for index in range(8)]  # 1.2 MB per response
    pending = []
    for array in inputs:
        tensors = [
            httpclient.InferInput("INPUT0", list(array.shape), "FP32"),
            httpclient.InferInput("INPUT1", list(array.shape), "FP32"),
        ]
        tensors[0].set_data_from_numpy(array)
        tensors[1].set_data_from_numpy(array)
        pending.append(client.async_infer("add_sub_wide", tensors))
    for array, request in zip(inputs, pending, strict=True):
        result = request.get_result(timeout=60)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), array * 2)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), array * 0)
    client.close()


def test_decoupled_responses_stream_from_the_worker(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put(error or result))
    words = grpcclient.InferInput("WORDS", [3], "BYTES")
    words.set_data_from_numpy(np.array([b"a", b"bb", b"ccc"], dtype=np.object_))
    count = grpcclient.InferInput("COUNT", [1], "INT32")
    count.set_data_from_numpy(np.array([5], np.int32))
    client.async_stream_infer("repeat", [words, count])
    received = []
    for _ in range(5):
        result = results.get(timeout=30)
        assert isinstance(result, grpcclient.InferResult), result
        received.append(result.as_numpy("OUT")[0])
    client.stop_stream()
    client.close()
    assert received == [b"a", b"bb", b"ccc", b"a", b"bb"]


@pytest.mark.parametrize(
    ("action", "reason"),
    [(1, "it was killed by SIGKILL"), (2, "it was killed by SIGSEGV"), (3, "it exited with status 3")],
)
def test_a_dying_worker_fails_its_request_and_comes_back(server: ServerProcess, action: int, reason: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    before = int(_faulty(client, 0).as_numpy("PID")[0])
    restarts = _restarts(server)
    with pytest.raises(InferenceServerException) as caught:
        _faulty(client, action)
    assert caught.value.status() == "500"
    assert caught.value.message() == (
        "Stub process 'faulty_0' is not healthy. The worker process of python model 'faulty' died while running "
        f"the request ({reason}); the instance is restarting"
    )
    # Other models never notice.
    other = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
    for tensor in other:
        tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(client.infer("add_sub_thread", other).as_numpy("OUTPUT0"), np.full((1, 4), 2.0))
    # The next request waits for the new worker rather than failing while it starts.
    after = int(_faulty(client, 0).as_numpy("PID")[0])
    assert after != before
    _wait_ready(client, "faulty")
    assert "python model 'faulty' instance 'faulty_0' restarted its process" in server.logs()
    assert _restarts(server) == restarts + 1
    client.close()


def test_a_large_request_crosses_in_memory_of_its_own_that_nothing_keeps(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    np.testing.assert_array_equal(_faulty(client, 0).as_numpy("OUTPUT0"), [2, 4, 6])  # the arenas are in use
    data = np.arange(6_000_000, dtype=np.float32)  # 24 MB each way: more than an arena keeps
    tensors = [httpclient.InferInput("INPUT0", [data.size], "FP32"), httpclient.InferInput("ACTION", [1], "INT32")]
    tensors[0].set_data_from_numpy(data, binary_data=True)
    tensors[1].set_data_from_numpy(np.array([0], np.int32))
    np.testing.assert_array_equal(client.infer("faulty", tensors).as_numpy("OUTPUT0"), data * 2)
    client.close()
    maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    assert "naiad-python-message" not in maps  # neither the request's memory nor the response's stays mapped
    arenas = [line.split()[0].split("-") for line in maps.splitlines() if "naiad-python-arena" in line]
    assert arenas  # the arenas of ordinary messages stay, and stay small
    assert max(int(end, 16) - int(start, 16) for start, end in arenas) <= 16 << 20


def _restarts(server: ServerProcess) -> float:
    """``naiad_python_worker_restarts`` of the faulty model's instance, from the metrics endpoint."""
    series = 'naiad_python_worker_restarts{instance="faulty_0",model="faulty",version="1"} '
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics").text
    assert "# TYPE naiad_python_worker_restarts counter" in text
    return next((float(line.removeprefix(series)) for line in text.splitlines() if line.startswith(series)), 0.0)


def test_an_execute_past_the_request_timeout_is_not_waited_for(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    _wait_ready(client, "faulty")
    started = time.monotonic()
    with pytest.raises(InferenceServerException) as caught:
        _faulty(client, 5, timeout_us=500_000)
    assert time.monotonic() - started < 10  # not the 60 s the model sleeps
    assert caught.value.message() == (
        "Stub process 'faulty_0' is not healthy. The worker process of python model 'faulty' died while running "
        "the request (it was killed: execute ran 5 s past the requests' timeout of 500 ms); the instance is "
        "restarting"
    )
    _wait_ready(client, "faulty")
    np.testing.assert_array_equal(_faulty(client, 0).as_numpy("OUTPUT0"), [2, 4, 6])
    client.close()


def test_cancelling_a_stream_reaches_the_model_in_its_worker(server: ServerProcess, tmp_path: Path) -> None:
    mark = tmp_path / "cancelled"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    ticks: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: ticks.put(error or result))
    tensor = grpcclient.InferInput("MARK", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([str(mark).encode()], dtype=np.object_))
    client.async_stream_infer("until_cancelled", [tensor])
    for _ in range(3):
        assert isinstance(ticks.get(timeout=30), grpcclient.InferResult)
    client.stop_stream(cancel_requests=True)
    client.close()
    deadline = time.monotonic() + 10
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "the model never saw request.is_cancelled()"


def test_a_busy_model_does_not_hold_up_health_or_other_models(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=2)
    ready = f"http://{server.http_url}/v2/health/ready"
    expected = httpx.get(ready).status_code  # 400: this repository has models that failed to load
    busy = threading.Thread(target=_faulty, args=(httpclient.InferenceServerClient(server.http_url), 4))
    busy.start()
    time.sleep(0.3)  # the 3 s loop is running in the worker
    try:
        started = time.monotonic()
        assert httpx.get(ready, timeout=5).status_code == expected
        assert httpx.get(f"http://{server.http_url}/v2/models/add_sub_thread/ready", timeout=5).status_code == 200
        tensors = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
        for tensor in tensors:
            tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
        client.infer("add_sub_thread", tensors)
        assert time.monotonic() - started < 0.5
        assert busy.is_alive()
    finally:
        busy.join()
        client.close()


def test_what_a_worker_logs_lands_in_the_server_log_naming_the_model(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    pid = int(client.infer("logger", [tensor]).as_numpy("PID")[0])
    client.close()
    assert pid != server.process.pid
    deadline = time.monotonic() + 10
    while "checking the weights failed" not in server.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = server.log_path.read_text().splitlines()
    # the server's format, the model named, the line break escaped as the server escapes what it logs
    hello = [line for line in lines if f"hello from worker {pid}" in line]
    assert len(hello) == 1, lines
    assert " W naiad.python.model] " in hello[0]
    assert hello[0].endswith("\\x0asecond line [model 'logger' version 1]")
    failed = next(index for index, line in enumerate(lines) if "checking the weights failed" in line)
    assert " E naiad.python.model] checking the weights failed [model 'logger' version 1]" in lines[failed]
    assert lines[failed + 1] == "Traceback (most recent call last):"
    assert "ValueError: the weights are odd" in lines[failed + 2 : failed + 8]


def test_auto_complete_runs_in_a_worker_that_then_serves_the_first_instance(
    server: ServerProcess, repository: Path
) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    pid = int(client.infer("completes_itself", [tensor]).as_numpy("PID")[0])
    client.close()
    assert pid != server.process.pid  # the model's code never runs in the server
    assert int((repository / "completes_itself" / "1" / "auto_complete_pid").read_text()) == pid


def test_a_model_that_fails_to_initialize_reports_why(server: ServerProcess) -> None:
    index = {
        entry["name"]: entry for entry in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    }
    assert index["broken"]["state"] == "UNAVAILABLE"
    assert "RuntimeError: no weights here" in index["broken"]["reason"]
    assert index["wrong_mode"]["state"] == "UNAVAILABLE"
    assert "config parameter INSTANCE_ISOLATION is 'fork'; use one of thread, process" in index["wrong_mode"]["reason"]
    assert index["init_exit"]["reason"] == (  # Triton's first sentence, then naiad's account
        "Internal: Stub process 'init_exit_0' is not healthy. The worker process of python model 'init_exit' failed "
        "while loading the model (it was killed by SIGKILL); see the log above for its output"
    )


def test_workers_fork_from_a_template_that_comes_back_when_it_dies(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    ready = [entry["name"] for entry in client.get_model_repository_index() if entry["state"] == "READY"]
    before = int(_faulty(client, 0).as_numpy("PID")[0])
    template = _parent_of(before)
    os.kill(template, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(before)  # a worker nobody can wait for any more is stopped
    for model in ready:
        _wait_ready(client, model)
    after = int(_faulty(client, 0).as_numpy("PID")[0])
    assert _parent_of(after) != template
    assert _parent_of(_parent_of(after)) == server.process.pid
    assert "the python backend's template process died" in server.logs()
    client.close()


def _alive(pid: int) -> bool:
    path = Path(f"/proc/{pid}/stat")
    return path.exists() and path.read_text().split()[2] != "Z"


def test_killing_the_server_leaves_no_worker_and_nothing_in_dev_shm(tmp_path: Path) -> None:
    repository = ModelRepositoryBuilder(tmp_path / "models")
    repository.add_python_model("faulty", FAULTY, FAULTY_CONFIG)
    before = set(os.listdir("/dev/shm"))
    server = start_server([repository.root])
    client = httpclient.InferenceServerClient(server.http_url)
    pid = int(_faulty(client, 0).as_numpy("PID")[0])
    template = _parent_of(pid)
    client.close()
    server.stop(sig=9)
    deadline = time.monotonic() + 10
    while (_alive(pid) or _alive(template)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert not _alive(template)
    assert _ours(set(os.listdir("/dev/shm")) - before) == set()


def _ours(names: set[str]) -> set[str]:
    """The /dev/shm entries a naiad process could have made (its own, Python's shared memory and
    semaphores); other programs on the machine, a perf_analyzer run say, add theirs meanwhile."""
    return {name for name in names if name.startswith(("naiad", "psm_", "sem.", "mp-"))}


FAILING_FINALIZE = """
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.how = args["model_name"]

    def execute(self, requests):
        pid = pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))
        return [pb_utils.InferenceResponse([pid]) for _ in requests]

    def finalize(self):
        if self.how == "finalize_raises":
            raise RuntimeError("the cache could not be flushed")
        time.sleep(60)
"""


def test_a_failing_or_hanging_finalize_never_holds_up_an_unload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(isolated_instance, "FINALIZE_TIMEOUT_S", 1.0)
    repository = ModelRepositoryBuilder(tmp_path / "models")
    for name in ("finalize_raises", "finalize_hangs"):
        repository.add_python_model(name, FAILING_FINALIZE, PID_CONFIG + PROCESS)
    with serve_in_thread([repository.root], model_control_mode="explicit", load_models=("*",)) as running:
        client = httpclient.InferenceServerClient(running.http_url)
        tensor = httpclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, np.float32))
        for name in ("finalize_raises", "finalize_hangs"):
            pid = int(client.infer(name, [tensor]).as_numpy("PID")[0])
            started = time.monotonic()
            client.unload_model(name)
            assert time.monotonic() - started < 10  # not the 60 s finalize sleeps
            assert not client.is_model_ready(name)
            with pytest.raises(ProcessLookupError):  # the worker is gone either way
                os.kill(pid, 0)
        client.close()
    assert "finalize() of model 'finalize_raises' raised RuntimeError: the cache could not be flushed" in caplog.text
    assert (
        "python model 'finalize_hangs' instance 'finalize_hangs_0': finalize() took longer than 1 s; its process "
        "is killed" in caplog.text
    )


def test_a_template_that_does_not_fork_in_time_fails_with_a_reason_and_its_late_worker_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(forked, "FORK_TIMEOUT_S", 1.0)
    template = forked.Template()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    control, their_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    late, late_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        template.fork([theirs.fileno(), their_control.fileno()], logging.INFO)  # a started template answers
        os.kill(template.process.pid, signal.SIGSTOP)
        with pytest.raises(OSError, match=r"template process \(pid \d+\) did not fork a worker within 1 s"):
            template.fork([late_theirs.fileno(), their_control.fileno()], logging.INFO)
        late_theirs.close()  # the late worker holds the only other end
        os.kill(template.process.pid, signal.SIGCONT)
        late.settimeout(20)
        assert late.recv(1) == b"", "the worker forked after the timeout still holds its socket"
        assert template.alive
    finally:
        os.kill(template.process.pid, signal.SIGCONT)
        template.process.kill()
        template.process.wait()
        for sock in (ours, theirs, control, their_control, late, late_theirs):
            sock.close()
