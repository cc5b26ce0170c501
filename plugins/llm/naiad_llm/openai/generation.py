"""One prompt through a model's vLLM-backend tensors: submit it, read back each choice's progress."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from naiad.backend import InferenceResponse, LoopSink, NaiadError, ServerHandle, Tensor
from naiad_llm.openai.errors import from_naiad
from naiad_llm.openai.target import TEXT_INPUT, TEXT_OUTPUT, Target

_RUNNING = ("", "None", "null")  # how a choice that has not finished reports its finish_reason


@dataclass(slots=True)
class Delta:
    """What one choice gained in one response."""

    index: int
    text: str
    finish_reason: str | None = None
    logprobs: list[Any] | None = None  # one entry per new token: token id -> log-probability (or details)
    output_tokens: int | None = None


@dataclass(slots=True)
class Step:
    """One model response: a delta per choice it carries, and the prompt's token count if reported."""

    deltas: list[Delta]
    input_tokens: int | None = None


@dataclass(slots=True)
class Choice:
    """A choice's whole output, summed from its deltas."""

    text: str = ""
    finish_reason: str | None = None
    logprobs: list[Any] = field(default_factory=list)
    output_tokens: int | None = None

    def add(self, delta: Delta) -> None:
        self.text += delta.text
        self.finish_reason = delta.finish_reason or self.finish_reason
        self.logprobs.extend(delta.logprobs or ())
        if delta.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + delta.output_tokens


class Generation:
    """A request queued on the model at construction (refusals raise there); read its steps in order."""

    def __init__(
        self,
        server: ServerHandle,
        target: Target,
        prompt: str,
        parameters: Mapping[str, Any],
        *,
        stream: bool,
        logprobs: bool,
    ) -> None:
        self.prompt = prompt
        self.done = False
        self._finished: set[int] = set()  # choices whose finish reason came (later responses repeat it)
        self._sink = LoopSink(server.inbox)
        inputs = _inputs(target, prompt, parameters, stream=stream, logprobs=logprobs)
        try:
            self._request = server.submit(target.serving, inputs, self._sink)
        except NaiadError as error:
            raise from_naiad(error) from None

    async def next_step(self) -> Step | None:
        """The next response's step; None once the last response came. A model's error raises."""
        while not self.done:
            event = await self._sink.next_event()
            if event.response is not None and event.response.error is not None:
                raise from_naiad(event.response.error)
            self.done = event.final
            if event.response is not None:
                step = _step(event.response)
                step.deltas = [delta for delta in step.deltas if delta.index not in self._finished]
                self._finished.update(delta.index for delta in step.deltas if delta.finish_reason is not None)
                return step
        return None

    async def collect(self) -> tuple[list[Choice], int | None]:
        """Every choice's whole output, and the prompt's token count if the model reported it."""
        choices: list[Choice] = []
        input_tokens = None
        while (step := await self.next_step()) is not None:
            input_tokens = step.input_tokens if step.input_tokens is not None else input_tokens
            for delta in step.deltas:
                choices.extend(Choice() for _ in range(delta.index + 1 - len(choices)))
                choices[delta.index].add(delta)
        return choices, input_tokens

    def cancel(self) -> None:
        """Cancel the request unless it has finished (a client that went away, a failed sibling)."""
        if not self.done:
            self.done = True
            self._request.cancel()


async def interleave(generations: Sequence[Generation]) -> AsyncIterator[tuple[int, Step]]:
    """The steps of several generations as they come, each with its generation's position."""
    pending = {asyncio.ensure_future(generation.next_step()): index for index, generation in enumerate(generations)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=pending.__getitem__):
                index = pending.pop(task)
                step = task.result()
                if step is not None:
                    pending[asyncio.ensure_future(generations[index].next_step())] = index
                    yield index, step
    finally:
        for task in pending:
            task.cancel()


def _inputs(
    target: Target, prompt: str, parameters: Mapping[str, Any], *, stream: bool, logprobs: bool
) -> list[Tensor]:
    shape = [1, 1] if target.batched else [1]
    values: dict[str, tuple[str, Any]] = {
        TEXT_INPUT: ("BYTES", prompt.encode()),
        "sampling_parameters": ("BYTES", json.dumps(parameters).encode()),
        "stream": ("BOOL", stream),
        "exclude_input_in_output": ("BOOL", True),
        "return_finish_reason": ("BOOL", True),
        "return_num_input_tokens": ("BOOL", True),
        "return_num_output_tokens": ("BOOL", True),
        "return_logprobs": ("BOOL", logprobs),
    }
    tensors = []
    for name, (datatype, value) in values.items():
        if name in target.inputs:
            array = np.empty(shape, dtype=np.object_ if datatype == "BYTES" else np.bool_)
            array.fill(value)
            tensors.append(Tensor(name, datatype, array))
    return tensors


def _step(response: InferenceResponse) -> Step:
    outputs = {tensor.name: tensor.numpy().reshape(-1) for tensor in response.outputs}
    texts = [_text(item) for item in outputs.get(TEXT_OUTPUT, ())]
    reasons = [_text(item) for item in outputs.get("finish_reason", ())]
    logprobs = [json.loads(_text(item)) for item in outputs.get("logprobs", ())]
    counts = [int(count) for count in outputs.get("num_output_tokens", ())]
    deltas = []
    for index, text in enumerate(texts):
        reason = _at(reasons, index)
        deltas.append(
            Delta(index, text, None if reason in _RUNNING else reason, _at(logprobs, index), _at(counts, index))
        )
    input_tokens = outputs.get("num_input_tokens")
    return Step(deltas, int(input_tokens[0]) if input_tokens is not None and input_tokens.size else None)


def _text(item: object) -> str:
    return item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)


def _at(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else None
