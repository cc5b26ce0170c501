"""The OpenAI-compatible API with the real ``openai`` client, against a python-backend model that speaks
Triton's vLLM-backend tensors: the frontend's protocol, independent of any engine.

``parrot`` answers the text between the prompt's last ``[[`` and ``]]`` (else the whole prompt), one
word per token, honouring ``max_tokens``, ``stop``, ``n`` and ``logprobs``; ``[[PARAMS]]`` answers the
sampling parameters it got as JSON, ``[[FAIL]]`` an INVALID_ARG error, ``[[SLOW ...]]`` one word every
50 ms (writing a marker file when cancelled). It has a tokenizer with a Hermes-style chat template
(config parameter ``tokenizer``); ``parrot_plain`` is the same model without one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

PARROT = r"""
import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

FLAGS = ("return_finish_reason", "return_num_input_tokens", "return_num_output_tokens", "return_logprobs")


def _input(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


def _strings(name, values):
    return pb_utils.Tensor(name, np.array([value.encode() for value in values], dtype=np.object_))


class TritonPythonModel:
    def initialize(self, args):
        self.marker = Path(json.loads(args["model_config"])["parameters"]["CANCEL_MARKER"]["string_value"])

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._run, args=(request,)).start()

    def _run(self, request):
        sender = request.get_response_sender()
        prompt = _input(request, "text_input", b"").decode()
        params = json.loads(_input(request, "sampling_parameters", b"{}").decode() or "{}")
        stream = bool(_input(request, "stream", False))
        flags = {name: bool(_input(request, name, False)) for name in FLAGS}
        start, end = prompt.rfind("[["), prompt.rfind("]]")
        reply = prompt[start + 2 : end] if 0 <= start < end else prompt
        if reply == "FAIL":
            error = pb_utils.TritonError("parrot refuses to say FAIL", pb_utils.TritonError.INVALID_ARG)
            sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        if reply == "PARAMS":
            reply = json.dumps(params, sort_keys=True)
        delay = 0.05 if reply.startswith("SLOW ") else 0.0
        reason = "stop"
        for stop in params.get("stop", []):
            if stop in reply:
                reply = reply[: reply.index(stop)]
        words = [word for word in re.split(r"(?<=\s)(?=\S)", reply) if word]
        if params.get("max_tokens") is not None and len(words) > params["max_tokens"]:
            words, reason = words[: params["max_tokens"]], "length"
        n, top = params.get("n", 1), params.get("logprobs")
        if not stream:  # a slow reply takes its time, streamed or not
            deadline = time.monotonic() + delay * len(words)
            while time.monotonic() < deadline and not sender.is_cancelled():
                time.sleep(0.01)
        pieces = words if stream else ["".join(words)]
        for number, piece in enumerate(pieces or [""]):
            if sender.is_cancelled():
                self.marker.write_text("cancelled")
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            last = number == max(len(pieces) - 1, 0)
            tokens = 1 if stream and piece else len(words)
            outputs = [_strings("text_output", [piece] * n)]
            if flags["return_finish_reason"]:
                outputs.append(_strings("finish_reason", [reason if last else "None"] * n))
            if flags["return_num_input_tokens"]:
                outputs.append(pb_utils.Tensor("num_input_tokens", np.array([len(prompt.split())], dtype=np.uint32)))
            if flags["return_num_output_tokens"]:
                outputs.append(pb_utils.Tensor("num_output_tokens", np.array([tokens] * n, dtype=np.uint32)))
            if flags["return_logprobs"]:
                said = [piece] if stream else words
                positions = [
                    {str(100 + i): {"logprob": -0.25, "rank": 1, "decoded_token": word},
                     "7": {"logprob": -3.0, "rank": 2, "decoded_token": "~"}}
                    for i, word in enumerate(said) if word
                ]
                kept = [dict(list(position.items())[: top + 1]) for position in positions]
                outputs.append(_strings("logprobs", [json.dumps(kept)] * n))
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs), flags=final)
            time.sleep(delay)
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true }},
  {{ name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_finish_reason" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_num_input_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_num_output_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_logprobs" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}
]
output [
  {{ name: "text_output" data_type: TYPE_STRING dims: [ -1 ] }},
  {{ name: "finish_reason" data_type: TYPE_STRING dims: [ -1 ] }},
  {{ name: "num_input_tokens" data_type: TYPE_UINT32 dims: [ 1 ] }},
  {{ name: "num_output_tokens" data_type: TYPE_UINT32 dims: [ -1 ] }},
  {{ name: "logprobs" data_type: TYPE_STRING dims: [ -1 ] }}
]
parameters {{ key: "CANCEL_MARKER" value: {{ string_value: "{marker}" }} }}
{extra}
"""

IDENTITY = """
name: "identity"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""
IDENTITY_SOURCE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""

# A Hermes / Qwen-style template: tools in a system turn, calls as <tool_call>{json}</tool_call>.
HERMES_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "You may call these functions:\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n"
    'Answer a call as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n'
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}{% if message.role != 'system' %}<|im_start|>{{ message.role }}\n"
    "{{ message.content }}{% for call in message.tool_calls or [] %}"
    '<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>'
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MAX_MODEL_LEN = 4096
WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parrot") / "cancelled"


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = HERMES_TEMPLATE
    folder = tmp_path_factory.mktemp("hermes-tokenizer")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, marker: Path, tokenizer_dir: Path) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("repository"))
    tokenizer = (
        f'parameters {{ key: "tokenizer" value: {{ string_value: "{tokenizer_dir}" }} }}\n'
        f'parameters {{ key: "max_model_len" value: {{ string_value: "{MAX_MODEL_LEN}" }} }}'
    )
    for name, extra in (("parrot", tokenizer), ("parrot_plain", "")):
        repository.add_python_model(name, PARROT, CONFIG.format(name=name, marker=marker, extra=extra))
    repository.add_python_model("identity", IDENTITY_SOURCE, IDENTITY)
    process = start_server([repository.root])
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{server.http_url}/v1", api_key="x", max_retries=0, timeout=30)


def say(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": f"[[{text}]]"}]


# -- models --------------------------------------------------------------------------------------


def test_models_lists_the_models_that_speak_text(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [model.id for model in models.data] == ["parrot", "parrot_plain"]
    assert all(model.object == "model" and model.owned_by == "naiad" for model in models.data)
    assert client.models.retrieve("parrot").id == "parrot"
    for missing in ("nope", "identity"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(missing)
        assert caught.value.code == "model_not_found"


# -- completions ---------------------------------------------------------------------------------


def test_completion(client: openai.OpenAI) -> None:
    completion = client.completions.create(model="parrot_plain", prompt="say [[hello there world]] now")
    assert completion.object == "text_completion"
    assert completion.model == "parrot_plain"
    assert [(choice.index, choice.text, choice.finish_reason) for choice in completion.choices] == [
        (0, "hello there world", "stop")
    ]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 3)
    assert completion.usage.total_tokens == 8


def test_completion_streamed_with_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model="parrot_plain", prompt="[[one two three]]", stream=True, stream_options={"include_usage": True}
        )
    )
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices]
    assert texts == ["one ", "two ", "three"]
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices] == [None, None, "stop"]
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (3, 3)
    assert len({chunk.id for chunk in chunks}) == 1


def test_completion_max_tokens_stop_n_and_several_prompts(client: openai.OpenAI) -> None:
    completion = client.completions.create(
        model="parrot_plain", prompt=["[[a b c d e]]", "[[x y. z]]"], max_tokens=3, stop=[". "], n=2
    )
    assert [(choice.index, choice.text, choice.finish_reason) for choice in completion.choices] == [
        (0, "a b c ", "length"),
        (1, "a b c ", "length"),
        (2, "x y", "stop"),
        (3, "x y", "stop"),
    ]
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3 + 3 + 2 + 2


def test_completion_echo_and_logprobs(client: openai.OpenAI) -> None:
    completion = client.completions.create(model="parrot_plain", prompt="[[hi you]]", echo=True, logprobs=1)
    choice = completion.choices[0]
    assert choice.text == "[[hi you]]hi you"
    assert choice.logprobs is not None
    assert choice.logprobs.tokens == ["hi ", "you"]
    assert choice.logprobs.token_logprobs == [-0.25, -0.25]
    assert choice.logprobs.top_logprobs == [{"hi ": -0.25}, {"you": -0.25}]
    assert choice.logprobs.text_offset == [10, 13]


def test_sampling_fields_reach_the_model_and_unknown_fields_are_ignored(client: openai.OpenAI) -> None:
    completion = client.completions.create(
        model="parrot_plain",
        prompt="[[PARAMS]]",
        temperature=0.5,
        top_p=0.9,
        seed=7,
        stop="\n\n",
        extra_body={"top_k": 5, "repetition_penalty": 1.1, "user_defined_field": {"x": 1}},
        user="someone",
    )
    assert json.loads(completion.choices[0].text) == {
        "n": 1,
        "repetition_penalty": 1.1,
        "seed": 7,
        "stop": ["\n\n"],
        "temperature": 0.5,
        "top_k": 5,
        "top_p": 0.9,
    }


# -- chat ----------------------------------------------------------------------------------------


def test_chat_renders_the_template_and_defaults_max_tokens_to_the_context_left(client: openai.OpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]
    echoed = client.chat.completions.create(model="parrot", messages=messages)
    prompt = echoed.choices[0].message.content
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    )
    params = client.chat.completions.create(model="parrot", messages=say("PARAMS"), logprobs=True, top_logprobs=1)
    assert params.usage is not None
    sent = json.loads(params.choices[0].message.content or "")
    assert sent["logprobs"] == 1
    assert 0 < sent["max_tokens"] < MAX_MODEL_LEN
    capped = client.chat.completions.create(model="parrot", messages=say("PARAMS"), max_completion_tokens=99)
    assert json.loads(capped.choices[0].message.content or "")["max_tokens"] == 99


def test_chat(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="parrot", messages=say("I am a parrot"), n=2)
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert [(choice.index, choice.message.role, choice.message.content) for choice in completion.choices] == [
        (0, "assistant", "I am a parrot"),
        (1, "assistant", "I am a parrot"),
    ]
    assert [choice.finish_reason for choice in completion.choices] == ["stop", "stop"]
    assert completion.choices[0].message.tool_calls is None
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 8


def test_chat_streamed(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="parrot",
        messages=say("tweet tweet tweet"),
        stream=True,
        stream_options={"include_usage": True},
        logprobs=True,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert content == "tweet tweet tweet"
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    logprobs = [chunk.choices[0].logprobs for chunk in chunks if chunk.choices and chunk.choices[0].logprobs]
    assert [entry.token for item in logprobs for entry in item.content or []] == ["tweet ", "tweet ", "tweet"]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3


def test_chat_logprobs(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="parrot", messages=say("ok go"), logprobs=True, top_logprobs=2, max_tokens=1
    )
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.content is not None
    [entry] = logprobs.content
    assert (entry.token, entry.logprob, entry.bytes) == ("ok ", -0.25, list(b"ok "))
    assert [(top.token, top.logprob) for top in entry.top_logprobs] == [("ok ", -0.25), ("~", -3.0)]
    assert completion.choices[0].finish_reason == "length"


# -- tools ---------------------------------------------------------------------------------------


def test_tools_reach_the_chat_template(client: openai.OpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    echoed = client.chat.completions.create(model="parrot", messages=messages, tools=[WEATHER])
    content = echoed.choices[0].message.content or ""
    assert json.dumps(WEATHER) in content
    assert content.endswith(
        "<|im_start|>assistant\n<|im_end|>\n<|im_start|>tool\nsunny<|im_end|>\n<|im_start|>assistant"
    )
    # The echoed prompt holds the earlier call as the template printed it, which parses as a call again.
    calls = [call for call in echoed.choices[0].message.tool_calls or [] if call.type == "function"]
    assert [(call.function.name, json.loads(call.function.arguments)) for call in calls] == [
        ("get_weather", {"city": "Paris"})
    ]


def test_tool_call(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="parrot", messages=say(f"Let me look. {CALL}"), tools=[WEATHER])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_")
    assert call.type == "function"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    untouched = client.chat.completions.create(model="parrot", messages=say(CALL), tools=[WEATHER], tool_choice="none")
    assert untouched.choices[0].message.content == CALL
    assert untouched.choices[0].finish_reason == "stop"


def test_tool_call_streamed(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(model="parrot", messages=say(f"{CALL} {CALL}"), tools=[WEATHER], stream=True)
    )
    calls = [call for chunk in chunks for call in chunk.choices[0].delta.tool_calls or []]
    assert [call.index for call in calls] == [0, 1]
    assert all(call.function and call.function.name == "get_weather" for call in calls)
    assert all(call.function and json.loads(call.function.arguments or "") == {"city": "Paris"} for call in calls)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == ""
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_fields", "param", "text"),
    [
        ({"temperature": 3}, "temperature", "'temperature' must be between 0.0 and 2.0, got 3"),
        ({"n": 0}, "n", "'n' must be between 1 and 128, got 0"),
        ({"messages": []}, "messages", "'messages' must be a non-empty list of messages"),
        ({"response_format": {"type": "json_object"}}, "response_format", "cannot follow response_format"),
        ({"tool_choice": "required", "tools": [WEATHER]}, "tool_choice", "cannot force a tool call"),
        ({"tool_choice": {"type": "function"}, "tools": [WEATHER]}, "tool_choice", "'tool_choice' must be"),
        ({"max_tokens": MAX_MODEL_LEN}, "messages", "This model's maximum context length is 4096 tokens"),
        ({"model": "parrot_plain"}, "model", "model 'parrot_plain' has no chat template"),
        ({"logit_bias": {"50256": -100}}, "logit_bias", "'logit_bias' is not supported"),
        (
            {"stream_options": {"include_usage": True}},
            "stream_options",
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        ),
    ],
)
def test_invalid_chat_requests(client: openai.OpenAI, request_fields: dict[str, Any], param: str, text: str) -> None:
    fields = {"model": "parrot", "messages": say("hi"), **request_fields}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**fields)
    assert caught.value.status_code == 400
    assert caught.value.param == param
    assert text in caught.value.message
    assert caught.value.type == "invalid_request_error"


def test_unknown_model_and_model_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=say("hi"))
    assert missing.value.code == "model_not_found"
    assert "The model `nope` does not exist." in missing.value.message
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError, match="parrot refuses to say FAIL"):
            client.chat.completions.create(model="parrot", messages=say("FAIL"), stream=stream)


def test_malformed_bodies(server: ServerProcess) -> None:
    for body in (b"{not json", b"[1, 2]"):
        response = httpx.post(f"http://{server.http_url}/v1/completions", content=body)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"


# -- cancellation --------------------------------------------------------------------------------


def wait_for(marker: Path) -> str:
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return marker.read_text()


def test_a_client_that_leaves_a_stream_cancels_its_request(client: openai.OpenAI, marker: Path) -> None:
    marker.unlink(missing_ok=True)
    stream = client.completions.create(model="parrot_plain", prompt=f"[[SLOW {' chirp' * 200}]]", stream=True)
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    stream.close()
    assert wait_for(marker) == "cancelled"


def test_a_client_that_stops_waiting_cancels_its_request(
    client: openai.OpenAI, server: ServerProcess, marker: Path
) -> None:
    client.chat.completions.create(model="parrot", messages=say("warm"))  # the tokenizer is loaded
    marker.unlink(missing_ok=True)
    body = {"model": "parrot", "messages": say(f"SLOW {' chirp' * 200}")}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"http://{server.http_url}/v1/chat/completions", json=body, timeout=0.5)
    assert wait_for(marker) == "cancelled"
