"""Ensembles end to end through tritonclient, HTTP and gRPC: steps, branches, streaming, errors, statistics."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, start_server

from .ensemble_models import BROKEN, build_repository


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("ensembles") / "models")
    process = start_server([repository], "--model-control-mode=explicit", "--load-model=*", timeout=120)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.http_url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


def _http_input(name: str, array: np.ndarray, datatype: str) -> httpclient.InferInput:
    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def _grpc_input(name: str, array: np.ndarray, datatype: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


TEXT = np.array([b"banana"], dtype=np.object_)
# tokenize: [len, count('a'), ord(first), 1] -> scale: x * 2 + 1 -> describe: "total=<sum>"
SCORES = np.array([6, 3, ord("b"), 1], dtype=np.float32) * 2 + 1
VECTOR = np.array([1, 2, 3, 4], dtype=np.float32)


def test_a_three_step_pipeline_of_python_onnxruntime_and_python_over_http(
    http: httpclient.InferenceServerClient,
) -> None:
    result = http.infer("pipeline", [_http_input("TEXT", TEXT, "BYTES")])
    np.testing.assert_array_equal(result.as_numpy("SCORES"), SCORES)
    assert result.as_numpy("LABEL").tolist() == [f"total={int(SCORES.sum())}".encode()]


def test_the_same_pipeline_over_grpc_returns_only_the_requested_output(grpc: grpcclient.InferenceServerClient) -> None:
    result = grpc.infer(
        "pipeline", [_grpc_input("TEXT", TEXT, "BYTES")], outputs=[grpcclient.InferRequestedOutput("LABEL")]
    )
    assert result.as_numpy("LABEL").tolist() == [f"total={int(SCORES.sum())}".encode()]
    assert result.as_numpy("SCORES") is None


def test_parallel_branches_run_at_the_same_time(http: httpclient.InferenceServerClient) -> None:
    http.infer("parallel", [_http_input("X", VECTOR, "FP32")])  # warm
    started = time.monotonic()
    result = http.infer("parallel", [_http_input("X", VECTOR, "FP32")])
    elapsed = time.monotonic() - started
    np.testing.assert_array_equal(result.as_numpy("SUM"), (VECTOR + 1) + (VECTOR + 100))
    assert elapsed < 0.38, f"two 200 ms branches took {elapsed:.3f} s: they did not overlap"


def test_an_ensemble_of_ensembles(grpc: grpcclient.InferenceServerClient) -> None:
    result = grpc.infer("nested", [_grpc_input("X", VECTOR, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("Z"), VECTOR + 3)


def test_a_decoupled_step_streams_the_ensembles_responses(server: ServerProcess) -> None:
    responses: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put(error or result))
    try:
        client.async_stream_infer(
            "streaming", [_grpc_input("N", np.array([3], dtype=np.int32), "INT32")], enable_empty_final_response=True
        )
        values: list[int] = []
        while True:
            item = responses.get(timeout=10)
            assert not isinstance(item, InferenceServerException), item
            final = item.get_response().parameters["triton_final_response"].bool_param
            out = item.as_numpy("OUT")
            assert out is not None or final, "only the final response may come without data"
            if out is not None:
                values.append(int(out[0]))
            if final:
                break
    finally:
        client.stop_stream()
        client.close()
    # As in Triton, the last answer carries the final flag when the step's flag-only final reached the
    # ensemble before that answer was made (the usual order); on a busy machine the last downstream
    # step may finish first, and a flag-only final follows the last answer.
    assert sorted(values) == [0, 10, 20]
    assert responses.empty()


def test_an_output_a_step_never_sends_is_left_out_and_an_optional_input_goes_without_it(
    http: httpclient.InferenceServerClient,
) -> None:
    """As in Triton: a step's declared output it answers without counts as known but empty, so the
    step taking it as an optional input runs without it and the ensemble's answer leaves it out."""
    tensor = httpclient.InferInput("X", [4], "FP32")
    tensor.set_data_from_numpy(VECTOR)
    result = http.infer("partial", [tensor])
    np.testing.assert_array_equal(result.as_numpy("S"), VECTOR * 2 + 100)  # B was not given to optional_sum
    assert [output["name"] for output in result.get_response()["outputs"]] == ["S"]
    assert http.get_inference_statistics("partial")["model_stats"][0]["inference_stats"]["fail"]["count"] == 0


def test_a_decoupled_ensemble_is_refused_over_http(http: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException, match="doesn't support models with decoupled transaction policy"):
        http.infer("streaming", [_http_input("N", np.array([1], dtype=np.int32), "INT32")])


def test_a_failing_step_fails_the_request_naming_the_ensemble(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    negative = np.array([-1, 2, 3, 4], dtype=np.float32)
    with pytest.raises(InferenceServerException) as over_http:
        http.infer("parallel", [_http_input("X", negative, "FP32")])
    with pytest.raises(InferenceServerException) as over_grpc:
        grpc.infer("parallel", [_grpc_input("X", negative, "FP32")])
    for error in (over_http.value, over_grpc.value):
        assert error.message().startswith("in ensemble 'parallel', ")
        assert "negative input to add" in error.message()


def test_outputs_come_in_tritons_order_over_both_protocols(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    over_http = http.infer("fork", [_http_input("X", VECTOR, "FP32")]).get_response()
    over_grpc = grpc.infer("fork", [_grpc_input("X", VECTOR, "FP32")]).get_response()
    assert [output["name"] for output in over_http["outputs"]] == ["DIFF", "SUM2"]
    assert [output.name for output in over_grpc.outputs] == ["DIFF", "SUM2"]


def test_a_request_runs_only_the_steps_its_outputs_need(http: httpclient.InferenceServerClient) -> None:
    def echo_executions() -> int:
        (stats,) = http.get_inference_statistics("echo_parameters")["model_stats"]
        return int(stats["execution_count"])

    before = echo_executions()
    result = http.infer("fork", [_http_input("X", VECTOR, "FP32")], outputs=[httpclient.InferRequestedOutput("SUM2")])
    np.testing.assert_array_equal(result.as_numpy("SUM2"), VECTOR + 1)
    assert result.as_numpy("DIFF") is None
    assert echo_executions() == before
    http.infer("fork", [_http_input("X", VECTOR, "FP32")])
    assert echo_executions() == before + 1


def test_a_batching_step_of_a_non_batching_ensemble_gets_a_batch_of_one(http: httpclient.InferenceServerClient) -> None:
    """As Triton: a tensor from a non-batching source gains a batch dimension of 1 for a batching step,
    and a batch of 1 loses it again on its way to an answer that has none."""
    x = np.arange(4, dtype=np.float32)
    result = http.infer("unbatched_over_batching", [_http_input("X", x, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("SEEN"), [1, 4])  # the step saw [1, 4]
    np.testing.assert_array_equal(result.as_numpy("Y"), x + 1)
    assert result.get_output("Y")["shape"] == [4]


def test_a_batch_of_one_reaches_a_non_batching_step_without_its_batch_dimension(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    """As Triton: a batching ensemble's batch of 1 reaches a non-batching step as the item alone, and the
    step's answer gets the batch dimension back; a larger batch cannot, and the step refuses it."""
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    result = http.infer("batching_over_unbatched", [_http_input("X", x, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("Y"), x + 1)
    assert result.get_output("Y")["shape"] == [1, 4]
    over_grpc = grpc.infer("batching_over_unbatched", [_grpc_input("X", x, "FP32")])
    np.testing.assert_array_equal(over_grpc.as_numpy("Y"), x + 1)
    with pytest.raises(InferenceServerException) as refused:
        http.infer("batching_over_unbatched", [_http_input("X", np.zeros((2, 4), np.float32), "FP32")])
    assert refused.value.status() == "400"
    assert refused.value.message() == (
        "in ensemble 'batching_over_unbatched', [request id: <id_unknown>] unexpected shape for input 'X' for model "
        "'add_one'. Expected [4], got [2,4]. "
    )


def test_invalid_inputs_are_refused_before_any_step_runs(http: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException, match="unexpected inference input 'WRONG' for model 'parallel'"):
        http.infer("parallel", [_http_input("WRONG", VECTOR, "FP32")])


def _seen_by_the_step(http: httpclient.InferenceServerClient, **settings: Any) -> Any:
    result = http.infer("with_parameters", [_http_input("X", VECTOR, "FP32")], **settings)
    return json.loads(result.as_numpy("PARAMETERS")[0])


def test_request_parameters_and_scheduling_reach_the_steps(http: httpclient.InferenceServerClient) -> None:
    seen = _seen_by_the_step(http, parameters={"tenant": "blue"}, priority=1, timeout=10**6)
    assert seen == {"parameters": {"tenant": "blue"}, "correlation_id": 0, "flags": 0, "timeout": 10**6}
    seen = _seen_by_the_step(http, sequence_id="s-1", sequence_start=True, sequence_end=True)
    assert seen == {"parameters": {}, "correlation_id": "s-1", "flags": 3, "timeout": 0}


def test_sequence_flags_reach_the_steps_without_a_sequence_id(server: ServerProcess) -> None:
    # Triton's ensembles hand every step the request's flags as they are.
    body = {"inputs": [{"name": "X", "shape": [4], "datatype": "FP32", "data": VECTOR.tolist()}]}
    body["parameters"] = {"sequence_start": True}
    response = httpx.post(f"http://{server.http_url}/v2/models/with_parameters/infer", json=body)
    outputs = {output["name"]: output["data"] for output in response.json()["outputs"]}
    seen = json.loads(outputs["PARAMETERS"][0])
    assert seen == {"parameters": {}, "correlation_id": 0, "flags": 1, "timeout": 0}


def test_cancelling_the_request_stops_the_steps_not_yet_started(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    before = _success_count(http, "slow_b")
    with pytest.raises(InferenceServerException, match="Deadline"):
        grpc.infer("slow_chain", [_grpc_input("X", VECTOR, "FP32")], client_timeout=0.1)
    time.sleep(0.6)  # slow_a ends after 0.2 s; slow_b would have run by now
    assert _success_count(http, "slow_b") == before


def _success_count(http: httpclient.InferenceServerClient, model: str) -> int:
    stats = http.get_inference_statistics(model)["model_stats"][0]
    return int(stats["inference_stats"]["success"]["count"])


def test_metadata_and_config_show_the_ensembles_own_tensors_and_steps(http: httpclient.InferenceServerClient) -> None:
    metadata = http.get_model_metadata("pipeline")
    assert metadata["platform"] == "ensemble"
    assert [t["name"] for t in metadata["inputs"]] == ["TEXT"]
    assert [t["name"] for t in metadata["outputs"]] == ["LABEL", "SCORES"]
    config = http.get_model_config("pipeline")
    assert [step["model_name"] for step in config["ensemble_scheduling"]["step"]] == ["tokenize", "scale", "describe"]
    assert config["ensemble_scheduling"]["step"][1]["input_map"] == {"FEATURES": "features"}
    assert config["model_transaction_policy"]["decoupled"] is False
    assert http.get_model_config("streaming")["model_transaction_policy"]["decoupled"] is True


def test_statistics_count_the_ensemble_and_each_composing_model(http: httpclient.InferenceServerClient) -> None:
    ensemble_before = _success_count(http, "two_steps")
    step_before = _success_count(http, "add_one")
    for _ in range(3):
        http.infer("two_steps", [_http_input("X", VECTOR, "FP32")])
    stats = http.get_inference_statistics("two_steps")["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) == ensemble_before + 3
    assert int(stats["execution_count"]) >= 3
    assert _success_count(http, "add_one") == step_before + 6


def test_an_ensemble_whose_requests_all_failed_has_no_last_inference(http: httpclient.InferenceServerClient) -> None:
    """As Triton: a failed ensemble request is counted as a failure, and is no inference."""
    for _ in range(2):
        with pytest.raises(InferenceServerException, match="negative input to add"):
            http.infer("failing_chain", [_http_input("X", -VECTOR - 1, "FP32")])
    stats = http.get_inference_statistics("failing_chain")["model_stats"][0]
    assert int(stats["inference_stats"]["fail"]["count"]) == 2
    assert int(stats["last_inference"]) == 0
    assert int(http.get_inference_statistics("add_one")["model_stats"][0]["last_inference"]) > 0  # the step ran


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "broken_unknown",
            "ensemble broken_unknown contains models that are not available or ambiguous: no_such_model",
        ),
        (
            "broken_dtype",
            "in ensemble broken_dtype, ensemble tensor X: inconsistent data type: TYPE_INT32 is inferred from model "
            "broken_dtype while TYPE_FP32 is inferred from model add_one",
        ),
        (
            "broken_shape",
            "in ensemble broken_shape, ensemble tensor X: inconsistent shape: [3] is inferred from model broken_shape "
            "while [4] is inferred from model add_one",
        ),
        (
            "broken_twice",
            "ensemble tensor 'Y' can appear in an output map only once for ensemble 'broken_twice' step 1",
        ),
        ("broken_unwritten", "ensemble output 'Z' for ensemble broken_unwritten' is not used"),
        (
            "broken_never_produced",
            "output 'Y' for ensemble 'broken_never_produced' is not written: at least one of its depending tensors, "
            "'nowhere', is not connected",
        ),
        ("broken_unused_input", "ensemble input 'EXTRA' for ensemble broken_unused_input' is not used"),
        (
            "broken_unmapped_input",
            "in ensemble broken_unmapped_input, input B in model join is not mapped to any ensemble tensors",
        ),
    ],
)
def test_a_broken_ensemble_is_unavailable_with_tritons_reason(
    http: httpclient.InferenceServerClient, name: str, reason: str
) -> None:
    assert name in BROKEN
    entries = [entry for entry in http.get_model_repository_index() if entry["name"] == name]
    assert entries
    assert all(entry.get("reason") == f"Invalid argument: {reason}" for entry in entries), entries
    assert not http.is_model_ready(name)
    with pytest.raises(InferenceServerException) as caught:  # Triton's load error: the message alone
        http.load_model(name)
    assert caught.value.message() == f"load failed for model '{name}': {reason}\n"
    with pytest.raises(InferenceServerException, match="unknown model"):
        http.infer(name, [_http_input("X", VECTOR, "FP32")])


def test_an_ensemble_whose_step_failed_to_load_says_why_the_step_failed(
    http: httpclient.InferenceServerClient,
) -> None:
    """Triton's text: the step's own load error follows the ensemble's."""
    (step,) = [entry for entry in http.get_model_repository_index() if entry["name"] == "fails_to_load"]
    assert step["reason"].startswith("Internal: RuntimeError: broken init")
    with pytest.raises(InferenceServerException) as caught:
        http.load_model("broken_step_failed")
    assert caught.value.message() == (
        "load failed for model 'broken_step_failed': ensemble 'broken_step_failed' depends on 'fails_to_load' which "
        "has no loaded version. Model 'fails_to_load' loading failed with error: version 1 is at UNAVAILABLE state: "
        f"{step['reason']};\n"
    )


def test_ensembles_on_a_cycle_are_listed_without_a_version_and_logged(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    entries = [entry for entry in http.get_model_repository_index() if entry["name"].startswith("broken_cycle")]
    assert entries == [{"name": "broken_cycle_a"}, {"name": "broken_cycle_b"}]  # as Triton lists them
    assert "circular dependency between ensembles: broken_cycle_a -> ... -> broken_cycle_b -> broken_cycle_a" in (
        server.logs()
    )
    assert not http.is_model_ready("broken_cycle_a")


def test_composing_models_of_broken_ensembles_keep_serving(http: httpclient.InferenceServerClient) -> None:
    result = http.infer("add_one", [_http_input("X", VECTOR, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("Y"), VECTOR + 1)


def test_z_unloading_a_composing_model_makes_the_ensemble_unavailable_until_it_is_back(
    http: httpclient.InferenceServerClient,
) -> None:
    assert http.is_model_ready("two_steps")
    http.unload_model("add_one")
    try:
        assert not http.is_model_ready("two_steps")
        assert not http.is_model_ready("nested")
        with pytest.raises(InferenceServerException, match="two_steps"):
            http.infer("two_steps", [_http_input("X", VECTOR, "FP32")])
    finally:
        http.load_model("add_one")
    assert http.is_model_ready("two_steps")
    assert http.is_model_ready("nested")  # taken along through two_steps, and back with it
    np.testing.assert_array_equal(http.infer("two_steps", [_http_input("X", VECTOR, "FP32")]).as_numpy("Y"), VECTOR + 2)
