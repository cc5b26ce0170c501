"""``model_warmup``: samples run on every instance before a version is READY, as in Triton 2.51.

The models record each request they execute (instance, request id, parameters, inputs) in a file
named by their config, so the tests see exactly what warmup sent.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

# Records what it executes; raises for an input whose first element is 7; sleeps `sleep` seconds on its
# first execution.
RECORDER = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.record = config["parameters"]["record"]["string_value"]
        self.sleep = float(config["parameters"].get("sleep", {"string_value": "0"})["string_value"])
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        if self.sleep:
            time.sleep(self.sleep)
            self.sleep = 0
        seen = []
        responses = []
        for request in requests:
            inputs = {}
            for tensor in request.inputs():
                data = tensor.as_numpy()
                values = [v.decode() if isinstance(v, bytes) else float(v) for v in data.flat]
                inputs[tensor.name()] = {"shape": list(data.shape), "values": values}
            seen.append({"id": request.request_id(), "parameters": request.parameters(), "inputs": inputs})
            first = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if first.dtype != np.object_ and first.size and first.flat[0] == 7:
                raise ValueError("seven is not welcome")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", first)]))
        with open(self.record, "a") as out:
            out.write(json.dumps({"instance": self.instance, "requests": seen}) + "\\n")
        return responses
"""


def config(
    record: Path,
    *,
    max_batch_size: int = 0,
    datatype: str = "TYPE_FP32",
    dims: str = "[ 4 ]",
    warmup: str = "",
    instances: int = 1,
    sleep: float = 0.0,
) -> str:
    return f"""
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "IN" data_type: {datatype} dims: {dims} }} ]
output [ {{ name: "OUT" data_type: {datatype} dims: {dims} }} ]
instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
parameters [ {{ key: "record" value {{ string_value: "{record}" }} }},
             {{ key: "sleep" value {{ string_value: "{sleep}" }} }} ]
model_warmup [ {warmup} ]
"""


def sample(name: str, data: str, *, batch_size: int = 1, count: int = 0, dims: str = "[ 4 ]", dtype: str = "") -> str:
    datatype = dtype or "TYPE_FP32"
    return (
        f'{{ name: "{name}" batch_size: {batch_size} count: {count} '
        f'inputs {{ key: "IN" value {{ data_type: {datatype} dims: {dims} {data} }} }} }}'
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, records: Path) -> Path:
    root = tmp_path_factory.mktemp("warmup") / "models"
    repo = ModelRepositoryBuilder(root)

    def add(name: str, **options: Any) -> None:
        repo.add_python_model(name, RECORDER, config(records / f"{name}.jsonl", **options))

    add("zeros", warmup=sample("zeros", "zero_data: true", count=2), instances=2)
    add("rows", max_batch_size=8, warmup=sample("rows", "random_data: true", batch_size=4, count=3))
    add("from_file", warmup=sample("file", 'input_data_file: "four_floats"'))
    (root / "from_file" / "warmup").mkdir()
    (root / "from_file" / "warmup" / "four_floats").write_bytes(np.arange(1, 5, dtype=np.float32).tobytes())
    add(
        "text",
        datatype="TYPE_STRING",
        dims="[ 2 ]",
        warmup=", ".join(
            [
                sample("empty", "zero_data: true", dims="[ 2 ]", dtype="TYPE_STRING"),
                sample("file", 'input_data_file: "words"', dims="[ 2 ]", dtype="TYPE_STRING"),
            ]
        ),
    )
    (root / "text" / "warmup").mkdir()
    words = b"".join(len(word).to_bytes(4, "little") + word for word in (b"hello", b"wor"))
    (root / "text" / "warmup" / "words").write_bytes(words)
    add("no_batch_size", warmup=sample("skipped", "zero_data: true", batch_size=0))
    # Loads that fail, each with Triton's reason.
    add("raises", warmup=sample("sevens", 'input_data_file: "sevens"'))
    (root / "raises" / "warmup").mkdir()
    (root / "raises" / "warmup" / "sevens").write_bytes(np.full(4, 7, dtype=np.float32).tobytes())
    add("missing_file", warmup=sample("gone", 'input_data_file: "nope"'))
    add("wrong_dims", warmup=sample("dims", "zero_data: true", dims="[ 3 ]"))
    add("too_big", max_batch_size=2, warmup=sample("big", "zero_data: true", batch_size=4))
    add("no_data", warmup=sample("nothing", ""))
    add("slow", warmup=sample("slow", "zero_data: true"), sleep=1.5)
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[ServerProcess]:
    process = start_server(
        [repository], "--model-control-mode=explicit", "--load-model=*", "--log-verbose=1", timeout=120
    )
    yield process
    process.stop()


def recorded(records: Path, model: str) -> list[dict[str, Any]]:
    path = records / f"{model}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def index(server: ServerProcess) -> dict[str, dict[str, Any]]:
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return {entry["name"]: entry for entry in json.loads(response.read())}


def stats(server: ServerProcess, model: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as response:
        entry: dict[str, Any] = json.loads(response.read())["model_stats"][0]
    return entry


def test_each_instance_runs_each_sample_count_times_before_serving(server: ServerProcess, records: Path) -> None:
    executions = recorded(records, "zeros")
    assert len(executions) == 4  # two instances, count 2
    assert sorted({execution["instance"] for execution in executions}) == ["zeros_0_0", "zeros_0_1"]
    for execution in executions:
        # Nothing tells a warmup request apart, as in Triton: no id, no parameters.
        assert execution["requests"] == [
            {"id": "", "parameters": "{}", "inputs": {"IN": {"shape": [4], "values": [0.0] * 4}}}
        ]
    entry = stats(server, "zeros")  # warmup counts in the statistics, as in Triton
    assert (entry["inference_count"], entry["execution_count"]) == (4, 4)
    assert entry["inference_stats"]["success"]["count"] == 4
    assert entry["last_inference"] > 0
    logs = server.logs()  # at --log-verbose 1, in Triton's words
    for instance in ("zeros_0_0", "zeros_0_1"):
        for iteration in (1, 2):
            assert (
                f"model 'zeros' instance {instance} is running warmup sample 'zeros' for iteration {iteration}" in logs
            )


def test_a_batching_model_gets_batch_size_requests_of_one_row(server: ServerProcess, records: Path) -> None:
    executions = recorded(records, "rows")
    assert len(executions) == 3
    for execution in executions:
        assert len(execution["requests"]) == 4
        assert {json.dumps(r["inputs"]["IN"]["shape"]) for r in execution["requests"]} == {"[1, 4]"}
    entry = stats(server, "rows")
    assert (entry["inference_count"], entry["execution_count"]) == (12, 3)
    assert [(batch["batch_size"], batch["compute_infer"]["count"]) for batch in entry["batch_stats"]] == [(4, 3)]


def test_data_comes_from_files_and_text_inputs_get_empty_strings(records: Path) -> None:
    assert recorded(records, "from_file")[0]["requests"][0]["inputs"]["IN"]["values"] == [1.0, 2.0, 3.0, 4.0]
    empty, from_file = recorded(records, "text")
    assert empty["requests"][0]["inputs"]["IN"]["values"] == ["", ""]
    assert from_file["requests"][0]["inputs"]["IN"]["values"] == ["hello", "wor"]


def test_a_sample_without_batch_size_is_skipped(server: ServerProcess, records: Path) -> None:
    assert recorded(records, "no_batch_size") == []
    assert index(server)["no_batch_size"]["state"] == "READY"


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("raises", "Invalid argument: failed to run warmup sample 'sevens': Failed to process the request(s)"),
        ("missing_file", "Internal: failed to open text file for read "),
        (
            "wrong_dims",
            "Invalid argument: [request id: <id_unknown>] unexpected shape for input 'IN' for model 'wrong_dims'. "
            "Expected [4], got [3]. ",
        ),
        (
            "too_big",
            "Invalid argument: failed to run warmup sample 'big': batch size 4 for 'too_big_0_0', max allowed is 2; ",
        ),
        (
            "no_data",
            "Invalid argument: [request id: <id_unknown>] warmup setting expects input 'IN' to have "
            "input_data_type set",
        ),
    ],
)
def test_a_failed_warmup_leaves_the_version_unavailable(server: ServerProcess, model: str, reason: str) -> None:
    entry = index(server)[model]
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"].startswith(reason)
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready(model)
    with pytest.raises(InferenceServerException, match=f"load failed for model '{model}'"):
        client.load_model(model)


def test_the_reason_names_the_exception_and_the_file(server: ServerProcess, repository: Path) -> None:
    reason = index(server)["raises"]["reason"]
    assert "ValueError: seven is not welcome" in reason
    assert str(repository / "missing_file" / "warmup" / "nope") in index(server)["missing_file"]["reason"]


def test_a_version_is_not_ready_while_it_warms_up(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("slow")
    load = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/slow/load", data=b"", method="POST")
    loaded = threading.Thread(target=lambda: urllib.request.urlopen(load, timeout=30).close())  # gevent: one thread
    loaded.start()
    try:
        deadline = time.monotonic() + 10
        while index(server)["slow"].get("state") != "LOADING" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert index(server)["slow"]["state"] == "LOADING"
        assert not client.is_model_ready("slow")
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://{server.http_url}/v2/models/slow/stats", timeout=10)
    finally:
        loaded.join(30)
    assert client.is_model_ready("slow")
    assert stats(server, "slow")["execution_count"] == 1
