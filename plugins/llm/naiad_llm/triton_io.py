"""Triton's vLLM-backend tensors: a request's inputs in, each engine output as a response.

Inputs: ``text_input``; optional ``stream``, ``sampling_parameters`` (JSON; without it the request
parameters), ``exclude_input_in_output`` and the ``return_*`` flags. Streaming sends each delta as a
response; otherwise one response carries the whole text, the prompt first unless
``exclude_input_in_output`` is true.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from naiad.backend import InferenceRequest, InferenceResponse, Tensor, invalid_arg
from naiad_llm.engine import GenerationOutput, GenerationRequest
from naiad_llm.sampling import parse_sampling, parse_sampling_json

RETURN_FLAGS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)
UNSUPPORTED_INPUTS = ("image", "embedding_request")


@dataclass(slots=True)
class TritonRequest:
    """What one Triton request asks of the engine, and how to answer it."""

    generation: GenerationRequest
    stream: bool
    prepend_input: bool
    flags: dict[str, bool]
    outputs: frozenset[str]
    text: list[str] = field(default_factory=list)  # non-streaming: the output so far
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[dict[int, float]] | None = None


def _flag(request: InferenceRequest, name: str) -> bool | None:
    tensor = request.inputs.get(name)
    if tensor is None:
        return None
    values = tensor.numpy().reshape(-1)
    if values.size != 1:
        raise invalid_arg(f"input '{name}' must hold one value, got {values.size}")
    return bool(values[0])


def _string(request: InferenceRequest, name: str) -> str | None:
    tensor = request.inputs.get(name)
    if tensor is None:
        return None
    values = tensor.numpy().reshape(-1)
    if values.size != 1:
        raise invalid_arg(f"input '{name}' must hold one string, got {values.size}")
    value = values[0]
    try:
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError:
        raise invalid_arg(f"input '{name}' is not valid UTF-8") from None


def parse_request(request: InferenceRequest, request_id: str) -> TritonRequest:
    """The engine request and answer options of ``request``; INVALID_ARG naming the input when wrong."""
    for name in UNSUPPORTED_INPUTS:
        if name in request.inputs:
            raise invalid_arg(f"input '{name}' is not supported by naiad's LLM backend (text generation only)")
    prompt = _string(request, "text_input")
    if prompt is None:
        raise invalid_arg("input 'text_input' is required")
    stream = bool(_flag(request, "stream"))
    exclude = _flag(request, "exclude_input_in_output")
    if stream and exclude is False:
        raise invalid_arg("When streaming, `exclude_input_in_output` = False is not allowed.")
    prepend = not exclude if exclude is not None else not stream
    sampling_json = _string(request, "sampling_parameters")
    if sampling_json is not None:
        sampling, lora = parse_sampling_json(sampling_json)
    else:
        sampling, lora = parse_sampling(request.parameters, strict=False)
    flags = {name: bool(_flag(request, name)) for name in RETURN_FLAGS}
    generation = GenerationRequest(request_id, prompt, sampling, lora)
    return TritonRequest(generation, stream, prepend, flags, frozenset(request.requested_outputs))


def streamed_response(triton: TritonRequest, output: GenerationOutput, tokenizer: Any) -> InferenceResponse:
    """The response for one streamed delta."""
    return _response(triton, output, output.text, list(output.token_ids), output.logprobs, tokenizer)


def accumulate(triton: TritonRequest, output: GenerationOutput) -> None:
    """Non-streaming: keep a delta for the one final response."""
    triton.text.append(output.text)
    triton.token_ids.extend(output.token_ids)
    if output.logprobs is not None:
        triton.logprobs = (triton.logprobs or []) + list(output.logprobs)


def final_response(triton: TritonRequest, last: GenerationOutput, tokenizer: Any) -> InferenceResponse:
    """Non-streaming: the one response with the whole text (after the prompt unless excluded)."""
    text = "".join(triton.text)
    if triton.prepend_input:
        text = triton.generation.prompt + text
    return _response(triton, last, text, triton.token_ids, triton.logprobs, tokenizer)


def _response(
    triton: TritonRequest,
    output: GenerationOutput,
    text: str,
    token_ids: list[int],
    logprobs: list[dict[int, float]] | None,
    tokenizer: Any,
) -> InferenceResponse:
    tensors = [_bytes("text_output", text)]
    flags = triton.flags
    if flags["return_finish_reason"]:
        tensors.append(_bytes("finish_reason", str(output.finish_reason)))
    if flags["return_cumulative_logprob"]:
        value = np.nan if output.cumulative_logprob is None else output.cumulative_logprob
        tensors.append(Tensor("cumulative_logprob", "FP32", np.array([value], dtype=np.float32)))
    if flags["return_logprobs"]:
        tensors.append(_bytes("logprobs", logprobs_json(logprobs, tokenizer)))
    if flags["return_num_input_tokens"]:
        tensors.append(Tensor("num_input_tokens", "UINT32", np.array([output.num_input_tokens], dtype=np.uint32)))
    if flags["return_num_output_tokens"]:
        tensors.append(Tensor("num_output_tokens", "UINT32", np.array([len(token_ids)], dtype=np.uint32)))
    return InferenceResponse([tensor for tensor in tensors if tensor.name in triton.outputs])


def _bytes(name: str, text: str) -> Tensor:
    return Tensor(name, "BYTES", np.array([text.encode("utf-8")], dtype=np.object_))


def logprobs_json(logprobs: list[dict[int, float]] | None, tokenizer: Any) -> str:
    """vLLM's per-token logprobs as Triton's backend serialises them: token id -> logprob, rank, text.

    A rank counts the tokens of that entry with a higher log-probability, so it is exact for the top
    alternatives; a drawn token outside them gets the rank after the last alternative.
    """
    if logprobs is None:
        return "null"
    document = []
    for entry in logprobs:
        ranked = sorted(entry.values(), reverse=True)
        document.append(
            {
                token: {
                    "logprob": logprob,
                    "rank": ranked.index(logprob) + 1,
                    "decoded_token": tokenizer.decode([token]) if tokenizer is not None else None,
                }
                for token, logprob in entry.items()
            }
        )
    return json.dumps(document)
