"""The transformers engine on a CUDA GPU, served end to end: the tiny model with ``kind: KIND_GPU``,
over HTTP generate and gRPC streaming, against transformers' own greedy ``generate`` on the same GPU.

Skips only where no CUDA device is visible (``torch.cuda.is_available()`` is false).
"""

from __future__ import annotations

import json
import queue
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from naiad.testing import ServerProcess, start_server
from naiad_llm.testing import model_repository_config, write_model_repository


def _cuda_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


pytestmark = pytest.mark.skipif(not _cuda_visible(), reason="needs a CUDA device: torch.cuda.is_available() is false")

MODEL = "tiny_gpu"
PROMPT = "Hello there"
NEW_TOKENS = 16
DEVICE = "cuda:0"


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = tmp_path_factory.mktemp("llm-gpu-repository")
    model_dir = write_model_repository(repository, MODEL, tiny_model)
    (model_dir / "config.pbtxt").write_text(model_repository_config(kind="KIND_GPU"))
    process = start_server([repository], timeout=180)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def engine_text(tiny_model: Path) -> str:
    """What transformers itself generates greedily on the GPU, without naiad."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(tiny_model))
    model: Any = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    model = model.to(DEVICE)
    model.generation_config.eos_token_id = None  # as ignore_eos: an end token does not stop it
    prompt = tokenizer(PROMPT, return_tensors="pt").to(DEVICE)
    with torch.no_grad():
        ids = model.generate(**prompt, do_sample=False, max_new_tokens=NEW_TOKENS, pad_token_id=tokenizer.pad_token_id)
    text: str = tokenizer.decode(ids[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    return text


def _generate(server: ServerProcess) -> dict[str, Any]:
    body = {
        "text_input": PROMPT,
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "exclude_input_in_output": True,
        "return_num_output_tokens": True,
    }
    request = urllib.request.Request(f"http://{server.http_url}/v2/models/{MODEL}/generate", json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=120) as response:
        document: dict[str, Any] = json.loads(response.read())
    return document


def test_the_model_is_served_from_the_gpu(server: ServerProcess) -> None:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{MODEL}/config", timeout=30) as response:
        config = json.loads(response.read())
    assert config["instance_group"][0]["kind"] == "KIND_GPU"
    assert f"engine ready on {DEVICE}" in server.logs()


def test_greedy_text_over_http_equals_transformers_own_generate(server: ServerProcess, engine_text: str) -> None:
    document = _generate(server)
    assert document["num_output_tokens"] == NEW_TOKENS
    assert document["text_output"] == engine_text


def test_grpc_streaming_delivers_the_same_text(server: ServerProcess, engine_text: str) -> None:
    received: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: received.put(error or result))
        sampling = json.dumps({"max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True})
        inputs = []
        for name, value, datatype in (
            ("text_input", np.array([PROMPT.encode()], dtype=np.object_), "BYTES"),
            ("sampling_parameters", np.array([sampling.encode()], dtype=np.object_), "BYTES"),
            ("stream", np.array([True]), "BOOL"),
            ("exclude_input_in_output", np.array([True]), "BOOL"),
        ):
            tensor = grpcclient.InferInput(name, [1], datatype)
            tensor.set_data_from_numpy(value)
            inputs.append(tensor)
        client.async_stream_infer(MODEL, inputs, enable_empty_final_response=True)
        pieces: list[str] = []
        while True:
            item = received.get(timeout=120)
            assert not isinstance(item, Exception), item
            if item.get_response().outputs:
                pieces.extend(piece.decode() for piece in item.as_numpy("text_output"))
            if item.get_response().parameters["triton_final_response"].bool_param:
                break
    finally:
        client.stop_stream()
        client.close()
    assert len(pieces) > 1
    assert "".join(pieces) == engine_text
