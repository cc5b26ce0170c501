"""The sequence batcher end to end: python models, the real tritonclient, HTTP and gRPC."""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

# Sums IN per sequence using the CORRID/START/READY control inputs; logs what it saw per
# request (one JSON line per execute) to <model dir>/log.jsonl.
ACCUMULATOR = """
import json
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.sleep = float(config["parameters"]["SLEEP"]["string_value"])
        self.log = Path(args["model_repository"]) / "log.jsonl"
        self.totals = {}

    def execute(self, requests):
        seen, responses = [], []
        for request in requests:
            value = lambda name: pb_utils.get_input_tensor_by_name(request, name).as_numpy().flatten()[0]
            key = value("CORRID")
            key = key.decode() if isinstance(key, bytes) else int(key)
            if value("READY"):
                if value("START"):
                    self.totals[key] = 0.0
                self.totals[key] += float(value("IN"))
            shape = [1, 1] if len(pb_utils.get_input_tensor_by_name(request, "IN").shape()) == 2 else [1]
            total = np.full(shape, self.totals.get(key, 0.0), dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", total)]))
            seen.append({
                "id": request.request_id(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "ready": bool(value("READY")),
                "corrid": key,
                "inputs": {t.name(): [t.as_numpy().dtype.name, list(t.shape())] for t in request.inputs()},
            })
        with self.log.open("a") as log:
            log.write(json.dumps(seen) + "\\n")
        time.sleep(self.sleep)
        return responses
"""

# Adds IN to the implicit state: OUT = STATE_OUT = STATE_IN + IN.
STATEFUL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            state = pb_utils.get_input_tensor_by_name(request, "STATE_IN").as_numpy()
            total = state + pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", total), pb_utils.Tensor("STATE_OUT", total)]
            ))
        return responses
"""


def accumulator_config(
    strategy: str = "",
    *,
    max_batch_size: int = 4,
    instances: int = 1,
    corrid: str = "TYPE_UINT64",
    sleep: float = 0.0,
    idle_us: int = 0,
) -> str:
    dims = "[ 1 ]"
    return f"""
        backend: "python"
        max_batch_size: {max_batch_size}
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: {dims} }} ]
        output [ {{ name: "OUT" data_type: TYPE_FP32 dims: {dims} }} ]
        instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
        parameters {{ key: "SLEEP" value: {{ string_value: "{sleep}" }} }}
        sequence_batching {{
          {strategy}
          max_sequence_idle_microseconds: {idle_us}
          control_input [
            {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
            {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
            {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
          ]
        }}
    """


STATEFUL_CONFIG = """
    backend: "python"
    max_batch_size: 2
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
    sequence_batching {
      state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
                initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" } } ]
    }
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("sequences") / "models")
    builder.add_python_model("accumulate", ACCUMULATOR, accumulator_config(idle_us=400_000))
    builder.add_python_model(
        "accumulate_str", ACCUMULATOR, accumulator_config(max_batch_size=0, instances=2, corrid="TYPE_STRING")
    )
    builder.add_python_model("accumulate_busy", ACCUMULATOR, accumulator_config(sleep=0.05, idle_us=5_000_000))
    oldest = "oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 20000 }"
    builder.add_python_model(
        "accumulate_oldest", ACCUMULATOR, accumulator_config(oldest, sleep=0.05, idle_us=5_000_000)
    )
    builder.add_python_model("stateful", STATEFUL, STATEFUL_CONFIG)
    # the same two in worker processes: sequence controls and implicit state cross the process boundary
    in_worker = '\nparameters { key: "INSTANCE_ISOLATION" value: { string_value: "process" } }'
    builder.add_python_model("accumulate_in_worker", ACCUMULATOR, accumulator_config(idle_us=400_000) + in_worker)
    builder.add_python_model("stateful_in_worker", STATEFUL, STATEFUL_CONFIG + in_worker)
    return builder.root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[ServerProcess]:
    process = start_server([repository], "--log-verbose=1")
    yield process
    process.stop()


def executed(repository: Path, model: str) -> list[list[dict[str, Any]]]:
    return [json.loads(line) for line in (repository / model / "log.jsonl").read_text().splitlines()]


class Client:
    """One protocol's tritonclient, reduced to what these tests need."""

    def __init__(self, server: ServerProcess, protocol: str) -> None:
        self.module: Any = httpclient if protocol == "http" else grpcclient
        url = server.http_url if protocol == "http" else server.grpc_url
        self.client: Any = self.module.InferenceServerClient(url)

    def infer(self, model: str, value: float, *, batch: int = 1, rank: int = 2, **options: Any) -> float:
        shape = [batch, 1] if rank == 2 else [1]
        tensor = self.module.InferInput("IN", shape, "FP32")
        tensor.set_data_from_numpy(np.full(shape, value, dtype=np.float32))
        result = self.client.infer(model, [tensor], **options)
        return float(result.as_numpy("OUT").flatten()[0])

    def error(self, model: str, value: float = 1.0, **options: Any) -> tuple[str, str]:
        with pytest.raises(InferenceServerException) as caught:
            self.infer(model, value, **options)
        return str(caught.value.status()), caught.value.message()

    def close(self) -> None:
        self.client.close()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[Client]:
    made = Client(server, request.param)
    yield made
    made.close()


def _base(client: Client) -> int:
    return 1000 if client.module is httpclient else 2000


@pytest.mark.parametrize("model", ["accumulate", "accumulate_in_worker"])
def test_interleaved_sequences_accumulate_separately(client: Client, repository: Path, model: str) -> None:
    a, b = _base(client) + 1, _base(client) + 2
    got = [
        client.infer(model, 1, sequence_id=a, sequence_start=True, request_id=f"a{a}"),
        client.infer(model, 10, sequence_id=b, sequence_start=True),
        client.infer(model, 2, sequence_id=a),
        client.infer(model, 20, sequence_id=b),
        client.infer(model, 3, sequence_id=a, sequence_end=True),
        client.infer(model, 30, sequence_id=b, sequence_end=True),
    ]
    assert got == [1, 10, 3, 30, 6, 60]
    mine = [r for batch in executed(repository, model) for r in batch if r["correlation_id"] == a]
    assert [r["flags"] for r in mine] == [1, 0, 2]
    assert mine[0]["id"] == f"a{a}"
    assert mine[0]["inputs"] == {
        "CORRID": ["uint64", [1, 1]],
        "READY": ["bool", [1, 1]],
        "START": ["int32", [1, 1]],
        "IN": ["float32", [1, 1]],
    }
    with pytest.raises(InferenceServerException):
        client.infer(model, 1, sequence_id=a)  # ended: a new request needs START


def _failures(server: ServerProcess, model: str) -> int:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as response:
        count: int = json.loads(response.read())["model_stats"][0]["inference_stats"]["fail"]["count"]
    return count


def test_sequence_request_errors_match_triton(client: Client, server: ServerProcess) -> None:
    invalid = "400" if client.module is httpclient else "StatusCode.INVALID_ARGUMENT"
    failures = _failures(server, "accumulate")
    assert client.error("accumulate") == (
        invalid,
        "inference request to model 'accumulate' must specify a non-zero or non-empty correlation ID",
    )
    assert client.error("accumulate", sequence_id=0, sequence_start=True)[1].endswith("non-empty correlation ID")
    assert client.error("accumulate", sequence_id=_base(client) + 77) == (
        invalid,
        f"inference request for sequence {_base(client) + 77} to model 'accumulate' must specify the START flag "
        "on the first request of the sequence",
    )
    assert client.error("accumulate", batch=2, sequence_id=5, sequence_start=True) == (
        invalid,
        "inference request to model 'accumulate' must specify batch-size 1 due to requirements of sequence batcher",
    )
    # Refused as invalid before they are queued: not failures in the statistics, as in Triton.
    assert _failures(server, "accumulate") == failures


def test_an_idle_sequence_expires(server: ServerProcess) -> None:
    client = Client(server, "http")
    try:
        assert client.infer("accumulate", 5, sequence_id=3001, sequence_start=True) == 5
        time.sleep(0.7)  # max_sequence_idle_microseconds: 400000
        assert client.error("accumulate", sequence_id=3001) == (
            "400",
            "inference request for sequence 3001 to model 'accumulate' must specify the START flag on the first "
            "request of the sequence",
        )
    finally:
        client.close()


def test_a_sequence_started_again_starts_over_with_tritons_warning(server: ServerProcess) -> None:
    client = Client(server, "http")
    try:
        assert client.infer("accumulate", 5, sequence_id=3101, sequence_start=True) == 5
        assert client.infer("accumulate", 7, sequence_id=3101, sequence_start=True) == 7  # no END before
        assert client.infer("accumulate", 1, sequence_id=3101, sequence_end=True) == 8
    finally:
        client.close()
    assert (
        "sequence 3101 for model 'accumulate' has a conflict. The previous sequence did not end before this "
        "sequence start. Previous sequence will be terminated early." in server.logs()
    )


def test_string_ids_with_a_string_corrid(client: Client, repository: Path) -> None:
    prefix = client.module.__name__.rsplit(".", 1)[-1]
    alpha, beta = f"{prefix}-alpha", f"{prefix}-beta"
    got = [
        client.infer("accumulate_str", 1, rank=1, sequence_id=alpha, sequence_start=True),
        client.infer("accumulate_str", 5, rank=1, sequence_id=beta, sequence_start=True),
        client.infer("accumulate_str", 2, rank=1, sequence_id=alpha, sequence_end=True),
        client.infer("accumulate_str", 5, rank=1, sequence_id=beta, sequence_end=True),
    ]
    assert got == [1, 5, 3, 10]
    mine = [r for batch in executed(repository, "accumulate_str") for r in batch if r["correlation_id"] == alpha]
    assert [(r["corrid"], r["flags"]) for r in mine] == [(alpha, 1), (alpha, 2)]
    assert mine[0]["inputs"]["CORRID"] == ["object", [1]]
    assert client.error("accumulate_str", rank=1, sequence_id=42, sequence_start=True)[1] == (
        "unexpected number of string elements 2 for inference input 'CORRID', expecting 1"
    )


@pytest.mark.parametrize("model", ["stateful", "stateful_in_worker"])
def test_implicit_state_carries_from_request_to_request(client: Client, model: str) -> None:
    sid = _base(client) + 500
    got = [
        client.infer(model, value, sequence_id=sid, sequence_start=index == 0, sequence_end=index == 2)
        for index, value in enumerate((1.0, 2.0, 3.0))
    ]
    assert got == [1, 3, 6]
    assert client.infer(model, 7, sequence_id=sid, sequence_start=True) == 7  # START resets it


def test_state_output_is_hidden_from_the_client(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1), dtype=np.float32))
    result = client.infer("stateful", [tensor], sequence_id=4001, sequence_start=True, sequence_end=True)
    assert [output["name"] for output in result.get_response()["outputs"]] == ["OUT"]
    client.close()


def _run_sequences(server: ServerProcess, model: str, base: int, count: int) -> dict[int, list[float]]:
    results: dict[int, list[float]] = {}

    def run(sid: int) -> None:
        client = Client(server, "http")
        try:
            results[sid] = [
                client.infer(model, step, sequence_id=sid, sequence_start=step == 1, sequence_end=step == 3)
                for step in (1, 2, 3)
            ]
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(base + index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_direct_slots_batch_sequences_and_backlog_the_rest(server: ServerProcess, repository: Path) -> None:
    results = _run_sequences(server, "accumulate_busy", 5000, 6)  # 6 sequences, 4 slots
    assert results == {5000 + index: [1, 3, 6] for index in range(6)}
    batches = executed(repository, "accumulate_busy")
    assert max(len(batch) for batch in batches) > 1
    for batch in batches:
        real = [r["correlation_id"] for r in batch if r["ready"]]
        assert len(real) == len(set(real))
        padding = [r for r in batch if not r["ready"]]
        assert all((r["correlation_id"], r["corrid"], r["flags"]) == (0, 0, 0) for r in padding)
    assert "executing a sequence batch of" in server.logs()


def test_oldest_batches_at_most_one_request_per_sequence(server: ServerProcess, repository: Path) -> None:
    results = _run_sequences(server, "accumulate_oldest", 6000, 6)
    assert results == {6000 + index: [1, 3, 6] for index in range(6)}
    batches = executed(repository, "accumulate_oldest")
    for batch in batches:
        assert all(r["ready"] for r in batch)
        ids = [r["correlation_id"] for r in batch]
        assert len(ids) == len(set(ids))
        assert len(batch) <= 4


def test_grpc_stream_carries_sequences_and_their_errors(server: ServerProcess) -> None:
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for step, flags in ((1, {"sequence_start": True}), (2, {}), (3, {"sequence_end": True}), (4, {})):
            tensor = grpcclient.InferInput("IN", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.full((1, 1), step, dtype=np.float32))
            client.async_stream_infer("accumulate", [tensor], sequence_id=7001, **flags)
        answers = [results.get(timeout=30) for _ in range(4)]
    finally:
        client.stop_stream()
        client.close()
    assert [float(result.as_numpy("OUT")[0][0]) for result, _ in answers[:3]] == [1, 3, 6]
    assert answers[3][0] is None
    assert "must specify the START flag" in answers[3][1].message()


def test_metadata_lists_no_control_or_state_inputs(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    for model in ("accumulate", "stateful"):
        metadata = client.get_model_metadata(model)
        assert [tensor["name"] for tensor in metadata["inputs"]] == ["IN"]
        assert [tensor["name"] for tensor in metadata["outputs"]] == ["OUT"]
    client.close()
