"""naiad in-process (:mod:`naiad.embedded`): real models in a repository the tests build, no network."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import naiad
from naiad import ErrorCode, NaiadError, Server
from naiad.testing import ModelRepositoryBuilder

IDENTITY = """
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

IDENTITY_IO = {
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
}

SLOW = IDENTITY + 'parameters { key: "execute_delay_ms" value: { string_value: "400" } }\n'

# Decoupled: COUNT responses from a thread, 20 ms apart; a cancelled request stops early and leaves a
# marker file named after the request id. Unloading it does not wait for its threads: the server must.
REPEAT = """
import threading
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.folder = Path(args["model_repository"])

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            sender = request.get_response_sender()
            threading.Thread(target=self._send, args=(sender, count, request.request_id())).start()
        return None

    def _send(self, sender, count, request_id):
        for index in range(count):
            if sender.is_cancelled():
                (self.folder / f"cancelled-{request_id}").write_text(str(index))
                break
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.array([index], np.int32))]))
            time.sleep(0.02)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

REPEAT_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "INDEX" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


def build_repository(root: Path) -> Path:
    builder = ModelRepositoryBuilder(root)
    builder.add_model("identity", IDENTITY, {"1/.keep": ""})
    builder.add_model("late", IDENTITY, {"1/.keep": ""})  # not loaded at start
    builder.add_model("slow", SLOW, {"1/.keep": ""})
    builder.add_python_model("repeat", REPEAT, REPEAT_CONFIG)
    return root


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("embedded") / "models")


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[Server]:
    with Server(repository, model_control_mode="explicit", load_models=["identity", "slow", "repeat"]) as started:
        yield started


def _count(n: int) -> dict[str, np.ndarray]:
    return {"COUNT": np.array([n], np.int32)}


def _cancelled_marker(repository: Path, request_id: str, timeout: float = 5.0) -> Path:
    marker = repository / "repeat" / f"cancelled-{request_id}"
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline, f"model 'repeat' never saw request '{request_id}' cancelled"
        time.sleep(0.01)
    return marker


# -- inference ---------------------------------------------------------------------------------


def test_outputs_are_the_models_own_arrays(server: Server) -> None:
    data = np.arange(6, dtype=np.float32)
    response = server.infer("identity", {"INPUT0": data})
    assert response.model_name == "identity"
    assert response.model_version == 1
    assert response.final
    # The identity model answers with (a view of) its input array: no copy in or out.
    assert np.shares_memory(response["OUTPUT0"], data)
    assert np.shares_memory(response.outputs["OUTPUT0"], data)
    assert response.tensors["OUTPUT0"].datatype == "FP32"


def test_inputs_may_be_tensors_and_array_likes(server: Server) -> None:
    tensor = naiad.Tensor("INPUT0", "FP32", np.ones(3, np.float32))
    assert server.infer("identity", {"INPUT0": tensor})["OUTPUT0"].tolist() == [1, 1, 1]
    assert server.infer("identity", {"INPUT0": np.array([1.5, 2.5], np.float32)})["OUTPUT0"].tolist() == [1.5, 2.5]


def test_infer_from_many_threads(server: Server) -> None:
    results: dict[int, list[float]] = {}

    def call(index: int) -> None:
        results[index] = server.infer("identity", {"INPUT0": np.full(2, index, np.float32)})["OUTPUT0"].tolist()

    threads = [threading.Thread(target=call, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {index: [index, index] for index in range(8)}


def test_infer_async_on_a_loop_of_the_callers(server: Server) -> None:
    async def main() -> list[list[float]]:
        responses = await asyncio.gather(
            *(server.infer_async("identity", {"INPUT0": np.full(2, index, np.float32)}) for index in range(5))
        )
        return [response["OUTPUT0"].tolist() for response in responses]

    assert asyncio.run(main()) == [[index, index] for index in range(5)]


def test_infer_async_cancelled_by_its_caller(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(server.infer_async("slow", {"INPUT0": np.ones(1, np.float32)}), 0.05)

    asyncio.run(main())  # the loop closes before the model answers: the answer is dropped, nothing fails
    assert server.infer("slow", {"INPUT0": np.ones(1, np.float32)})["OUTPUT0"].tolist() == [1]
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []


def test_infer_timeout_cancels_the_request(server: Server) -> None:
    with pytest.raises(NaiadError) as caught:
        server.infer("slow", {"INPUT0": np.ones(1, np.float32)}, timeout=0.05)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert caught.value.message.startswith("model 'slow' sent no response within 0.05 s; the request was cancelled")


# -- streaming ---------------------------------------------------------------------------------


def test_stream_a_decoupled_model(server: Server) -> None:
    responses = list(server.stream("repeat", _count(4)))
    assert [int(response["INDEX"][0]) for response in responses] == [0, 1, 2, 3]
    assert not any(response.final for response in responses)  # the model sends its final flag alone


def test_stream_a_decoupled_model_async(server: Server) -> None:
    async def main() -> list[int]:
        return [int(response["INDEX"][0]) async for response in server.stream_async("repeat", _count(3))]

    assert asyncio.run(main()) == [0, 1, 2]


def test_stream_a_model_with_one_response(server: Server) -> None:
    stream = server.stream("identity", {"INPUT0": np.ones(2, np.float32)})
    (response,) = list(stream)
    assert response.final
    assert stream.finished


def test_cancel_a_stream(server: Server, repository: Path) -> None:
    stream = server.stream("repeat", _count(500), request_id="cancel-me")
    received = []
    for response in stream:
        received.append(int(response["INDEX"][0]))
        if len(received) == 2:
            stream.cancel()
    assert 2 <= len(received) < 500  # iteration ends quietly after the cancel
    assert stream.finished
    _cancelled_marker(repository, "cancel-me")


def test_leaving_an_async_stream_cancels_it(server: Server, repository: Path) -> None:
    async def main() -> None:
        async with server.stream_async("repeat", _count(500), request_id="left-early") as stream:
            async for response in stream:
                assert int(response["INDEX"][0]) == 0
                break

    asyncio.run(main())
    _cancelled_marker(repository, "left-early")


def test_decoupled_models_answer_streams_only(server: Server) -> None:
    with pytest.raises(NaiadError) as caught:
        server.infer("repeat", _count(1))
    assert caught.value.code is ErrorCode.UNSUPPORTED
    assert caught.value.message == (
        "model 'repeat' uses the decoupled transaction policy and may send any number of responses; "
        "read them with Server.stream() or Server.stream_async()"
    )


# -- errors ------------------------------------------------------------------------------------


def test_errors_carry_tritons_message_and_code(server: Server) -> None:
    cases: list[tuple[Callable[[], object], ErrorCode, str]] = [
        (lambda: server.infer("missing", {}), ErrorCode.NOT_FOUND, "Request for unknown model: 'missing' is not found"),
        (
            lambda: server.infer("identity", {"INPUT0": np.ones(2, np.int32)}),
            ErrorCode.INVALID_ARG,
            "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'INT32', but model 'identity' "
            "expects 'FP32'",
        ),
        (
            lambda: server.stream("identity", {"INPUT0": np.ones(2, np.complex64)}),
            ErrorCode.INVALID_ARG,
            "numpy dtype 'complex64' has no Triton datatype",
        ),
        (
            lambda: server.infer("identity", {"INPUT0": naiad.Tensor("X", "FP32", np.ones(1, np.float32))}),
            ErrorCode.INVALID_ARG,
            "input 'INPUT0' for model 'identity' is given as tensor 'X'; name the tensor as its key, "
            "or pass the array itself",
        ),
    ]
    for call, code, message in cases:
        with pytest.raises(NaiadError) as caught:
            call()
        assert (caught.value.code, caught.value.message) == (code, message)


def test_a_server_not_started_refuses_requests(repository: Path) -> None:
    idle = Server(repository)
    with pytest.raises(NaiadError, match="this naiad server is not started; call start"):
        idle.infer("identity", {"INPUT0": np.ones(1, np.float32)})
    assert not idle.live()


def test_bad_options_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist or is not a folder"):
        Server(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="model_control_mode must be one of"):
        Server(tmp_path, model_control_mode="manual")
    with pytest.raises(ValueError, match="load_models applies with model_control_mode='explicit' only"):
        Server(tmp_path, load_models=["a"])


# -- model repository and queries --------------------------------------------------------------


def test_load_with_a_config_override_then_unload(server: Server) -> None:
    assert not server.model_ready("late")
    override = {
        "backend": "identity",
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}],
    }
    server.load_model("late", override)
    assert server.model_ready("late")
    assert [i["name"] for i in server.model_config("late")["input"]] == ["X"]
    assert server.infer("late", {"X": np.ones(2, np.float32)})["Y"].tolist() == [1, 1]
    server.unload_model("late")
    assert not server.model_ready("late")
    assert {"name": "late", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"} in server.models()
    with pytest.raises(NaiadError) as caught:
        server.infer("late", {"X": np.ones(2, np.float32)})
    assert caught.value.message == "Request for unknown model: 'late' has no available versions"
    with pytest.raises(NaiadError) as caught:
        server.load_model("nowhere")
    assert caught.value.message == "failed to load 'nowhere', failed to poll from model repository"


def test_load_a_model_from_files(server: Server) -> None:
    config = {"backend": "identity", **IDENTITY_IO}
    server.load_model("from_files", json.dumps(config), files={"1/.keep": b""})
    assert server.infer("from_files", {"INPUT0": np.ones(1, np.float32)})["OUTPUT0"].tolist() == [1]
    server.unload_model("from_files")
    assert not server.model_ready("from_files")


def test_health_metadata_config_and_statistics(server: Server) -> None:
    assert server.live()
    assert server.ready()
    assert server.metadata()["name"] == "triton"
    assert server.model_ready("identity", 1)
    assert not server.model_ready("identity", 2)
    metadata = server.model_metadata("identity")
    assert metadata["versions"] == ["1"]
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}]
    assert server.model_config("identity")["backend"] == "identity"
    before = server.model_statistics("identity")["model_stats"][0]["inference_count"]
    server.infer("identity", {"INPUT0": np.ones(1, np.float32)})
    assert server.model_statistics("identity", 1)["model_stats"][0]["inference_count"] == before + 1


# -- start and stop ----------------------------------------------------------------------------


def test_stop_finishes_accepted_requests(repository: Path) -> None:
    server = Server(repository, model_control_mode="explicit", load_models=["slow", "repeat"]).start()
    slow = server.stream("slow", {"INPUT0": np.full(1, 7, np.float32)})  # accepted once stream() returns
    words = server.stream("repeat", _count(40))  # 800 ms of responses
    server.stop()
    started = time.monotonic()
    assert [int(response["INDEX"][0]) for response in words] == list(range(40))
    assert [response["OUTPUT0"].tolist() for response in slow] == [[7]]
    assert time.monotonic() - started < 0.2  # every response was in before stop() returned
    assert not server.live()
    with pytest.raises(NaiadError) as caught:
        server.infer("slow", {"INPUT0": np.ones(1, np.float32)})
    assert (caught.value.code, caught.value.message) == (ErrorCode.UNAVAILABLE, "Server not ready: it is shutting down")
    server.stop()  # idempotent


def test_exit_on_error_fails_start(tmp_path: Path) -> None:
    builder = ModelRepositoryBuilder(tmp_path / "models")
    builder.add_model("no_version", IDENTITY)  # no version folder: fails to load
    server = Server(builder.root, exit_on_error=True)
    with pytest.raises(NaiadError, match="some models failed to load"):
        server.start()
    assert not server.live()
    with pytest.raises(NaiadError, match="this naiad server is not started"):
        server.infer("no_version", {"INPUT0": np.ones(1, np.float32)})
    with pytest.raises(RuntimeError, match="create a new Server"):
        server.start()


def test_log_options_set_up_logging_until_stop(repository: Path, tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    log_file = tmp_path / "naiad.log"
    try:
        with Server(repository, model_control_mode="explicit", log_verbose=0, log_file=str(log_file)):
            assert "is ready: in-process only, no listeners" in log_file.read_text()
        assert "naiad stopped" in log_file.read_text()
        assert all(getattr(handler, "baseFilename", "") != str(log_file) for handler in root.handlers)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
