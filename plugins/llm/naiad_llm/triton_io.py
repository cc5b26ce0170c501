"""Triton's vLLM-backend tensors: a request's inputs in, each engine output as a response.

Inputs: ``text_input``; optional ``stream``, ``sampling_parameters`` (JSON; without it the request
parameters), ``exclude_input_in_output`` and the ``return_*`` flags. Streaming sends each delta as a
response; otherwise one response carries the whole text, the prompt first unless
``exclude_input_in_output`` is true. With ``n`` choices every output tensor holds one element per
choice, as Triton's vLLM backend sends them (a streamed response fills in the choice that moved).
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
class ChoiceState:
    """One choice's progress: its latest output and, when not streaming, everything it generated."""

    last: GenerationOutput | None = None
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[dict[int, float]] | None = None


@dataclass(slots=True)
class TritonRequest:
    """What one Triton request asks of the engine, and how to answer it."""

    generation: GenerationRequest
    stream: bool
    prepend_input: bool
    flags: dict[str, bool]
    outputs: frozenset[str]
    choices: list[ChoiceState] = field(default_factory=list)

    @property
    def started(self) -> bool:
        """Whether any choice has produced an output."""
        return any(choice.last is not None for choice in self.choices)

    @property
    def finished(self) -> bool:
        """Whether every choice has finished."""
        return all(choice.last is not None and choice.last.finished for choice in self.choices)

    @property
    def output_tokens(self) -> int:
        """Tokens generated over every choice so far."""
        return sum(choice.last.num_output_tokens for choice in self.choices if choice.last is not None)

    def record(self, index: int, output: GenerationOutput) -> None:
        """Take choice ``index``'s new output (kept whole for the one response when not streaming)."""
        choice = self.choices[index]
        choice.last = output
        if not self.stream:
            choice.text.append(output.text)
            choice.token_ids.extend(output.token_ids)
            if output.logprobs is not None:
                choice.logprobs = (choice.logprobs or []) + list(output.logprobs)


@dataclass(frozen=True, slots=True)
class _Element:
    """One choice's element in each output tensor of a response."""

    text: str
    token_count: int
    finish_reason: str | None
    cumulative_logprob: float | None
    logprobs: list[dict[int, float]] | None


def _single(request: InferenceRequest, name: str, what: str) -> Any:
    """The one element of input ``name`` (None when absent); INVALID_ARG when it holds more."""
    tensor = request.inputs.get(name)
    if tensor is None:
        return None
    values = tensor.numpy().reshape(-1)
    if values.size != 1:
        raise invalid_arg(f"input '{name}' must hold one {what}, got {values.size}")
    return values[0]


def _flag(request: InferenceRequest, name: str) -> bool | None:
    value = _single(request, name, "value")
    return None if value is None else bool(value)


def _string(request: InferenceRequest, name: str) -> str | None:
    value = _single(request, name, "string")
    if value is None:
        return None
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
    choices = [ChoiceState() for _ in range(sampling.n)]
    return TritonRequest(generation, stream, prepend, flags, frozenset(request.requested_outputs), choices)


def streamed_response(triton: TritonRequest, index: int, tokenizer: Any) -> InferenceResponse:
    """The response for choice ``index``'s latest delta; other choices add empty elements."""
    no_logprobs: list[dict[int, float]] | None = None if triton.generation.sampling.logprobs is None else []
    elements = []
    for position, choice in enumerate(triton.choices):
        last = choice.last
        if position == index and last is not None:
            elements.append(
                _Element(last.text, len(last.token_ids), last.finish_reason, last.cumulative_logprob, last.logprobs)
            )
        else:
            reason = last.finish_reason if last is not None else None
            cumulative = last.cumulative_logprob if last is not None else None
            elements.append(_Element("", 0, reason, cumulative, no_logprobs))
    return _response(triton, elements, input_tokens(triton), tokenizer)


def final_response(triton: TritonRequest, tokenizer: Any) -> InferenceResponse:
    """Non-streaming: the one response with each choice's whole text (after the prompt unless excluded)."""
    prefix = triton.generation.prompt if triton.prepend_input else ""
    elements = []
    for choice in triton.choices:
        last = choice.last
        elements.append(
            _Element(
                prefix + "".join(choice.text),
                len(choice.token_ids),
                last.finish_reason if last is not None else None,
                last.cumulative_logprob if last is not None else None,
                choice.logprobs,
            )
        )
    return _response(triton, elements, input_tokens(triton), tokenizer)


def input_tokens(triton: TritonRequest) -> int:
    """The prompt's token count, as the engine reported it (0 before any output)."""
    return next((choice.last.num_input_tokens for choice in triton.choices if choice.last is not None), 0)


def _response(triton: TritonRequest, elements: list[_Element], input_tokens: int, tokenizer: Any) -> InferenceResponse:
    tensors = [_strings("text_output", [element.text for element in elements])]
    flags = triton.flags
    if flags["return_finish_reason"]:
        tensors.append(_strings("finish_reason", [str(element.finish_reason) for element in elements]))
    if flags["return_cumulative_logprob"]:
        values = [np.nan if element.cumulative_logprob is None else element.cumulative_logprob for element in elements]
        tensors.append(Tensor("cumulative_logprob", "FP32", np.array(values, dtype=np.float32)))
    if flags["return_logprobs"]:
        tensors.append(_strings("logprobs", [logprobs_json(element.logprobs, tokenizer) for element in elements]))
    if flags["return_num_input_tokens"]:
        tensors.append(Tensor("num_input_tokens", "UINT32", np.array([input_tokens], dtype=np.uint32)))
    if flags["return_num_output_tokens"]:
        counts = [element.token_count for element in elements]
        tensors.append(Tensor("num_output_tokens", "UINT32", np.array(counts, dtype=np.uint32)))
    return InferenceResponse([tensor for tensor in tensors if tensor.name in triton.outputs])


def _strings(name: str, texts: list[str]) -> Tensor:
    array = np.empty(len(texts), dtype=np.object_)
    array[:] = [text.encode("utf-8") for text in texts]
    return Tensor(name, "BYTES", array)


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
