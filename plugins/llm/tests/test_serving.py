"""The tiny model served over real sockets: Triton's vLLM-backend tensors, gRPC streaming, HTTP generate,
cancellation, statistics and vLLM's metric families. One server for the whole module."""

from __future__ import annotations

import asyncio
import http.client
import json
import queue
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from naiad.testing import ServerProcess, start_server
from naiad_llm.engine import GenerationRequest
from naiad_llm.engines import EngineSettings
from naiad_llm.engines.transformers_engine import TransformersEngine
from naiad_llm.sampling import parse_sampling
from naiad_llm.testing import write_model_repository

MODEL = "tiny"
TRITON_VLLM_CONFIG = 'backend: "vllm"\n\ninstance_group [\n  {\n    count: 1\n    kind: KIND_MODEL\n  }\n]\n'
TRITON_VLLM_MODEL_JSON = (
    '{\n    "model":"facebook/opt-125m",\n    "gpu_memory_utilization": 0.1,\n    "enforce_eager": true\n}\n'
)


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = tmp_path_factory.mktemp("llm-repository")
    write_model_repository(repository, MODEL, tiny_model)
    vllm_model = repository / "vllm_model"
    (vllm_model / "1").mkdir(parents=True)
    (vllm_model / "config.pbtxt").write_text(TRITON_VLLM_CONFIG)
    (vllm_model / "1" / "model.json").write_text(TRITON_VLLM_MODEL_JSON)
    process = start_server([repository], timeout=120)
    yield process
    process.stop()


def post(server: ServerProcess, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        body: bytes = response.read()
        return body


def generate(server: ServerProcess, **body: Any) -> dict[str, Any]:
    status, data = post(server, f"/v2/models/{MODEL}/generate", {"text_input": "Hello there", **body})
    assert status == 200, data
    document: dict[str, Any] = json.loads(data)
    return document


def metric(server: ServerProcess, name: str) -> float:
    text = get(f"http://127.0.0.1:{server.metrics_port}/metrics").decode()
    match = re.search(rf'^{re.escape(name)}\{{model="{MODEL}",version="1"\}} (\S+)$', text, re.MULTILINE)
    assert match, f"{name} missing"
    return float(match.group(1))


class Stream:
    """A gRPC ModelStreamInfer call and the responses it received."""

    def __init__(self, server: ServerProcess) -> None:
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.results: queue.Queue[Any] = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.results.put(error or result))

    def send(self, prompt: str, sampling: dict[str, Any], **flags: bool) -> None:
        inputs = [self._tensor("text_input", np.array([prompt.encode()], dtype=np.object_), "BYTES")]
        inputs.append(
            self._tensor("sampling_parameters", np.array([json.dumps(sampling).encode()], dtype=np.object_), "BYTES")
        )
        for name, value in {"stream": True, **flags}.items():
            inputs.append(self._tensor(name, np.array([value], dtype=bool), "BOOL"))
        self.client.async_stream_infer(MODEL, inputs, enable_empty_final_response=True)

    @staticmethod
    def _tensor(name: str, data: np.ndarray[Any, Any], datatype: str) -> grpcclient.InferInput:
        tensor = grpcclient.InferInput(name, list(data.shape), datatype)
        tensor.set_data_from_numpy(data)
        return tensor

    def collect(self) -> list[Any]:
        responses = []
        while True:
            result = self.results.get(timeout=60)
            if isinstance(result, Exception):
                raise result
            responses.append(result)
            if result.get_response().parameters["triton_final_response"].bool_param:
                return responses


def test_a_config_naming_only_the_backend_is_auto_completed(server: ServerProcess) -> None:
    config = json.loads(get(f"http://{server.http_url}/v2/models/{MODEL}/config"))
    assert config["max_batch_size"] == 0
    assert config["model_transaction_policy"]["decoupled"] is True
    inputs = {tensor["name"]: tensor for tensor in config["input"]}
    assert inputs["text_input"]["data_type"] == "TYPE_STRING"
    assert not inputs["text_input"]["optional"]
    assert inputs["sampling_parameters"]["optional"]
    assert inputs["stream"]["data_type"] == "TYPE_BOOL"
    outputs = {tensor["name"]: tensor["data_type"] for tensor in config["output"]}
    assert outputs == {
        "text_output": "TYPE_STRING",
        "finish_reason": "TYPE_STRING",
        "cumulative_logprob": "TYPE_FP32",
        "logprobs": "TYPE_STRING",
        "num_input_tokens": "TYPE_UINT32",
        "num_output_tokens": "TYPE_UINT32",
    }


def test_grpc_streaming_sends_tokens_as_several_responses_then_the_final_flag(server: ServerProcess) -> None:
    stream = Stream(server)
    try:
        stream.send("Hello", {"max_tokens": 16, "temperature": 0, "ignore_eos": True}, return_num_output_tokens=True)
        responses = stream.collect()
    finally:
        stream.client.stop_stream()
    with_text = [response for response in responses if response.as_numpy("num_output_tokens") is not None]
    # One response per token as a rule; tokens that come while the engine's reader is behind (a busy
    # machine), or that end inside a character, share one.
    assert len(with_text) >= 2
    assert sum(int(response.as_numpy("num_output_tokens")[0]) for response in with_text) == 16


def test_http_generate_returns_one_response_with_the_prompt_first(server: ServerProcess) -> None:
    document = generate(server, max_tokens=4, temperature=0, return_num_input_tokens=True)
    assert document["text_output"].startswith("Hello there")
    assert document["num_input_tokens"] > 0
    excluded = generate(server, max_tokens=4, temperature=0, exclude_input_in_output=True)
    assert document["text_output"] == "Hello there" + excluded["text_output"]


def test_http_generate_stream_sends_server_sent_events(server: ServerProcess) -> None:
    status, data = post(
        server,
        f"/v2/models/{MODEL}/generate_stream",
        {"text_input": "Hello", "stream": True, "max_tokens": 16, "ignore_eos": True, "return_num_output_tokens": True},
    )
    assert status == 200
    events = [json.loads(line[len(b"data: ") :]) for line in data.splitlines() if line.startswith(b"data: ")]
    assert sum(event["num_output_tokens"] for event in events) == 16
    assert len(events) >= 2  # tokens that come before naiad took the previous ones share an event


def test_every_return_flag_adds_its_output(server: ServerProcess) -> None:
    flags = {
        "return_finish_reason": True,
        "return_cumulative_logprob": True,
        "return_logprobs": True,
        "return_num_input_tokens": True,
        "return_num_output_tokens": True,
    }
    document = generate(server, max_tokens=3, ignore_eos=True, seed=1, logprobs=2, **flags)
    assert document["finish_reason"] == "length"
    assert document["num_output_tokens"] == 3
    logprobs = json.loads(document["logprobs"])
    assert len(logprobs) == 3
    assert all(2 <= len(entry) <= 3 for entry in logprobs)
    chosen = [max(entry.values(), key=lambda item: item["logprob"]) for entry in logprobs]
    assert all({"logprob", "rank", "decoded_token"} <= set(item) for item in chosen)
    assert document["cumulative_logprob"] < 0
    plain = generate(server, max_tokens=1)
    assert set(plain) == {"model_name", "model_version", "text_output"}
    assert json.loads(generate(server, max_tokens=1, return_logprobs=True)["logprobs"]) is None


@pytest.mark.parametrize(
    ("sampling", "field"),
    [
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"n": 0}, "n"),
        ({"structured_outputs": json.dumps({"regex": "a+"})}, "structured_outputs"),
        ({"json_schema": {"type": "spaceship"}}, "json_schema"),
        ({"max_tokens": 100000}, "max_tokens"),
    ],
)
def test_invalid_sampling_is_an_invalid_arg_naming_the_field(
    server: ServerProcess, sampling: dict[str, Any], field: str
) -> None:
    status, data = post(
        server, f"/v2/models/{MODEL}/generate", {"text_input": "Hi", "sampling_parameters": json.dumps(sampling)}
    )
    assert status == 400
    assert f"'{field}'" in json.loads(data)["error"]


def test_n_choices_come_back_as_one_element_each(server: ServerProcess) -> None:
    sampling = {"n": 3, "max_tokens": 4, "temperature": 1.0, "seed": 7, "ignore_eos": True}
    flags = {"return_finish_reason": True, "return_num_output_tokens": True}
    document = generate(server, exclude_input_in_output=True, **sampling, **flags)
    assert len(document["text_output"]) == 3
    assert len(set(document["text_output"])) > 1  # seeds 7, 8 and 9
    assert document["finish_reason"] == ["length"] * 3
    assert document["num_output_tokens"] == [4] * 3
    with_prompt = generate(server, n=2, max_tokens=2, ignore_eos=True)
    assert all(text.startswith("Hello there") for text in with_prompt["text_output"])


def test_n_choices_stream_over_grpc_each_response_moving_one(server: ServerProcess) -> None:
    stream = Stream(server)
    try:
        sampling = {"n": 2, "max_tokens": 3, "temperature": 1.0, "ignore_eos": True}
        stream.send("Hello", sampling, return_num_output_tokens=True, return_finish_reason=True)
        responses = stream.collect()
    finally:
        stream.client.stop_stream()
    with_text = [response for response in responses if response.as_numpy("text_output") is not None]
    counts = np.array([response.as_numpy("num_output_tokens") for response in with_text])
    assert counts.shape == (len(with_text), 2)
    assert counts.sum(axis=0).tolist() == [3, 3]
    assert all(np.count_nonzero(row) == 1 for row in counts)  # each response carries one choice's delta
    assert [reason.decode() for reason in with_text[-1].as_numpy("finish_reason")] == ["length", "length"]


def test_structured_outputs_as_tritons_vllm_backend_takes_them(server: ServerProcess) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]}},
        "required": ["ok", "color"],
    }
    for seed in range(3):
        sampling = {"structured_outputs": json.dumps({"json": schema}), "temperature": 1.0, "seed": seed}
        document = generate(server, exclude_input_in_output=True, return_finish_reason=True, **sampling)
        value = json.loads(document["text_output"])
        assert isinstance(value["ok"], bool)
        assert value["color"] in {"red", "green", "blue"}
        assert list(value) == ["ok", "color"]
        assert document["finish_reason"] == "stop"
    unconstrained = generate(server, exclude_input_in_output=True, max_tokens=12, temperature=1.0, seed=0)
    with pytest.raises(json.JSONDecodeError):
        json.loads(unconstrained["text_output"])


def test_a_seed_makes_sampling_reproducible(server: ServerProcess) -> None:
    sampling = {"max_tokens": 12, "temperature": 1.0, "seed": 1234, "ignore_eos": True}
    first, second = (generate(server, exclude_input_in_output=True, **sampling)["text_output"] for _ in range(2))
    assert first == second
    others = {
        generate(server, exclude_input_in_output=True, **{**sampling, "seed": seed})["text_output"]
        for seed in (1, 2, 3)
    }
    assert len(others | {first}) > 1


def test_served_text_matches_the_engine_driven_in_process(server: ServerProcess, tiny_model: Path) -> None:
    sampling = {"max_tokens": 10, "temperature": 0.8, "top_k": 50, "seed": 7, "ignore_eos": True}
    served = generate(server, exclude_input_in_output=True, **sampling)["text_output"]

    async def in_process() -> str:
        engine = TransformersEngine(EngineSettings("local", str(tiny_model), {}, tiny_model))
        await engine.start()
        try:
            settings, _ = parse_sampling(sampling, strict=True)
            pieces = [output.text async for output in engine.generate(GenerationRequest("r", "Hello there", settings))]
            return "".join(pieces)
        finally:
            await engine.stop()

    assert asyncio.run(in_process()) == served


def test_a_frequency_penalty_makes_greedy_decoding_repeat_itself_less(tiny_model: Path) -> None:
    async def tokens(**penalty: float) -> list[int]:
        engine = TransformersEngine(EngineSettings("local", str(tiny_model), {}, tiny_model))
        await engine.start()
        try:
            values = {"max_tokens": 24, "temperature": 0, "ignore_eos": True, **penalty}
            settings, _ = parse_sampling(values, strict=True)
            request = GenerationRequest("r", "Hello there", settings)
            return [token for output in [o async for o in engine.generate(request)] for token in output.token_ids]
        finally:
            await engine.stop()

    def most_repeated(ids: list[int]) -> int:
        return max(ids.count(token) for token in ids)

    plain = asyncio.run(tokens())
    penalised = asyncio.run(tokens(frequency_penalty=2.0, presence_penalty=1.0))
    assert len(plain) == len(penalised) == 24
    assert most_repeated(plain) > 1  # greedy decoding of a random model loops
    assert most_repeated(penalised) < most_repeated(plain)


def test_stop_strings_end_the_text_and_are_not_emitted(server: ServerProcess) -> None:
    full = generate(server, max_tokens=12, temperature=0, ignore_eos=True, exclude_input_in_output=True)["text_output"]
    stop = full[3:5]
    cut = generate(
        server,
        max_tokens=12,
        temperature=0,
        ignore_eos=True,
        exclude_input_in_output=True,
        stop=stop,
        return_finish_reason=True,
    )
    assert cut["text_output"] == full[: full.index(stop)]
    assert cut["finish_reason"] == "stop"


def test_min_tokens_holds_back_the_tokens_that_end_the_output(server: ServerProcess) -> None:
    def run(**sampling: Any) -> dict[str, Any]:
        greedy = {"max_tokens": 6, "temperature": 0, "ignore_eos": True, **sampling}
        flags = {"return_num_output_tokens": True, "return_finish_reason": True, "return_logprobs": True}
        return generate(server, sampling_parameters=json.dumps(greedy), **flags)

    (token,) = (int(key) for key in json.loads(run(logprobs=0)["logprobs"])[0])  # greedy decoding's first pick
    ended = run(stop_token_ids=[token])
    assert (ended["num_output_tokens"], ended["finish_reason"]) == (1, "stop")
    held = run(stop_token_ids=[token], min_tokens=3)
    assert held["num_output_tokens"] >= 3  # that token could not end it before the third


def test_max_tokens_caps_the_output(server: ServerProcess) -> None:
    document = generate(server, max_tokens=2, ignore_eos=True, return_num_output_tokens=True, return_finish_reason=True)
    assert document["num_output_tokens"] == 2
    assert document["finish_reason"] == "length"


def test_a_cancelled_stream_frees_its_engine_slot(server: ServerProcess) -> None:
    generated_before = metric(server, "vllm:generation_tokens_total")
    stream = Stream(server)
    stream.send("Hello", {"max_tokens": 400, "ignore_eos": True, "seed": 0})
    stream.results.get(timeout=60)  # the first token: it is running
    assert metric(server, "vllm:num_requests_running") == 1
    stream.client.stop_stream(cancel_requests=True)
    deadline = time.monotonic() + 10
    while metric(server, "vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, "the cancelled request still holds its slot"
        time.sleep(0.05)
    generated = metric(server, "vllm:generation_tokens_total") - generated_before
    assert generated < 400
    time.sleep(0.3)
    assert metric(server, "vllm:generation_tokens_total") - generated_before == generated


def _wait_until_idle(server: ServerProcess, what: str) -> None:
    deadline = time.monotonic() + 10
    while metric(server, "vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, f"{what} still holds its engine slot"
        time.sleep(0.05)


def test_a_client_leaving_generate_stream_frees_its_engine_slot(server: ServerProcess) -> None:
    generated_before = metric(server, "vllm:generation_tokens_total")
    body = {"text_input": "Hello", "stream": True, "max_tokens": 400, "ignore_eos": True}
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    connection.request("POST", f"/v2/models/{MODEL}/generate_stream", json.dumps(body))
    response = connection.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"data: ")  # the first token: it is running
    assert metric(server, "vllm:num_requests_running") == 1
    response.close()  # the client goes away mid-stream
    connection.close()
    _wait_until_idle(server, "the request of the client that left")
    assert metric(server, "vllm:generation_tokens_total") - generated_before < 400  # stopped, not finished


def test_a_grpc_deadline_frees_its_engine_slot(server: ServerProcess) -> None:
    generated_before = metric(server, "vllm:generation_tokens_total")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put(error or result), stream_timeout=0.5)
    try:
        inputs = [
            Stream._tensor("text_input", np.array([b"Hello"], dtype=np.object_), "BYTES"),
            Stream._tensor(
                "sampling_parameters",
                np.array([json.dumps({"max_tokens": 400, "ignore_eos": True}).encode()], dtype=np.object_),
                "BYTES",
            ),
            Stream._tensor("stream", np.array([True]), "BOOL"),
        ]
        client.async_stream_infer(MODEL, inputs)
        assert not isinstance(results.get(timeout=60), Exception)  # running
        _wait_until_idle(server, "the request whose deadline passed")
        assert metric(server, "vllm:generation_tokens_total") - generated_before < 400  # stopped, not finished
    finally:
        client.stop_stream()
        client.close()


def test_statistics_count_each_request(server: ServerProcess) -> None:
    def counts() -> tuple[int, int]:
        stats = json.loads(get(f"http://{server.http_url}/v2/models/{MODEL}/stats"))["model_stats"][0]
        return int(stats["inference_count"]), int(stats["execution_count"])

    before = counts()
    generate(server, max_tokens=2)
    after = counts()
    assert after[0] == before[0] + 1
    assert after[1] == before[1] + 1


def test_vllm_metric_families_carry_model_and_version_labels(server: ServerProcess) -> None:
    generate(server, max_tokens=3, ignore_eos=True)
    text = get(f"http://127.0.0.1:{server.metrics_port}/metrics").decode()
    labels = f'model="{MODEL}",version="1"'
    for histogram in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds"):
        assert f"# TYPE vllm:{histogram} histogram" in text
        assert f"vllm:{histogram}_count{{{labels}}}" in text
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert f"# TYPE vllm:{gauge} gauge" in text
        assert f"vllm:{gauge}{{{labels}}}" in text
    assert metric(server, "vllm:prompt_tokens_total") > 0
    assert metric(server, "vllm:generation_tokens_total") >= 3


def test_infer_keeps_refusing_the_decoupled_model(server: ServerProcess) -> None:
    status, data = post(
        server,
        f"/v2/models/{MODEL}/infer",
        {"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES", "data": ["Hi"]}]},
    )
    assert status == 501
    assert "decoupled" in json.loads(data)["error"]


def test_a_triton_vllm_repository_without_vllm_is_unavailable_naming_the_extra(server: ServerProcess) -> None:
    index = json.loads(post(server, "/v2/repository/index", {})[1])
    entry = next(model for model in index if model["name"] == "vllm_model")
    assert entry["state"] == "UNAVAILABLE"
    assert "pip install 'naiad-llm[vllm]'" in entry["reason"]
    assert "vLLM needs a CUDA GPU" in entry["reason"]
