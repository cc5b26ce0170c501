"""``POST /v1/completions``: one or more prompts, ``n`` completions each."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from naiad.backend import ServerHandle
from naiad_llm.openai.errors import invalid
from naiad_llm.openai.generation import Choice, Generation, Step, interleave
from naiad_llm.openai.logprobs import completion_logprobs, read_positions
from naiad_llm.openai.prompts import count_tokens
from naiad_llm.openai.responses import Envelope, finish_reason, output_tokens, usage
from naiad_llm.openai.sampling import fit_max_tokens, json_schema, sampling_parameters, stream_settings
from naiad_llm.openai.target import Target, Targets
from naiad_llm.openai.transport import event_stream, flag, read_json, until_disconnected


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A completion request, validated: one set of sampling parameters per prompt."""

    target: Target
    prompts: list[str]
    prompt_tokens: list[int | None]
    parameters: list[dict[str, Any]]
    n: int
    logprobs: int | None
    echo: bool
    stream: bool
    include_usage: bool


async def parse_completion(targets: Targets, body: dict[str, Any]) -> CompletionRequest:
    """Validate a completion request."""
    target = await targets.resolve(body.get("model"))
    prompts = _prompts(target, body.get("prompt"))
    if body.get("suffix"):
        raise invalid("'suffix' is not supported", "suffix")
    common = sampling_parameters(body, "max_tokens")
    schema = json_schema(body, target)
    if schema is not None:
        common["json_schema"] = schema
    logprobs = body.get("logprobs")
    if logprobs is not None:
        if not isinstance(logprobs, int) or isinstance(logprobs, bool) or not 0 <= logprobs <= 20:
            raise invalid("'logprobs' must be an integer between 0 and 20", "logprobs")
        common["logprobs"] = logprobs
    counts = [count_tokens(target, prompt) for prompt in prompts]
    parameters = []
    for count in counts:
        own = dict(common)
        fit_max_tokens(own, count, target, "prompt")
        parameters.append(own)
    stream, include_usage = stream_settings(body)
    return CompletionRequest(
        target, prompts, counts, parameters, common["n"], logprobs, flag(body, "echo"), stream, include_usage
    )


async def completions(targets: Targets, server: ServerHandle, request: Request) -> Response:
    body = await read_json(request)
    completion = await parse_completion(targets, body)
    envelope = Envelope.new("cmpl", "text_completion", str(body["model"]))
    generations: list[Generation] = []

    def cancel() -> None:
        for generation in generations:
            generation.cancel()

    try:
        for prompt, parameters in zip(completion.prompts, completion.parameters, strict=True):
            generations.append(
                Generation(
                    server,
                    completion.target,
                    prompt,
                    parameters,
                    stream=completion.stream,
                    logprobs=completion.logprobs is not None,
                )
            )
        if completion.stream:
            steps = interleave(generations)
            first = await until_disconnected(request, anext(steps, None))  # a model's error gets its status
            return event_stream(_Stream(completion, envelope).chunks(first, steps), cancel)
        results = [await until_disconnected(request, generation.collect()) for generation in generations]
    except BaseException:
        cancel()
        raise
    choices = []
    prompt_tokens = 0
    for number, (outputs, input_tokens) in enumerate(results):
        prompt_tokens += _prompt_tokens(completion, number, input_tokens)
        choices += [
            _choice(completion, number, index, choice, completion.prompts[number] if completion.echo else "")
            for index, choice in enumerate(outputs)
        ]
    every = [choice for outputs, _ in results for choice in outputs]
    return JSONResponse(envelope.wrap(choices, usage=usage(prompt_tokens, output_tokens(completion.target, every))))


def _choice(completion: CompletionRequest, number: int, index: int, choice: Choice, echo: str) -> dict[str, Any]:
    return {
        "index": number * completion.n + index,
        "text": echo + choice.text,
        "logprobs": _logprobs(completion, choice.logprobs, len(echo)),
        "finish_reason": finish_reason(choice.finish_reason),
    }


def _logprobs(completion: CompletionRequest, positions: list[Any] | None, offset: int) -> dict[str, Any] | None:
    if completion.logprobs is None or positions is None:
        return None
    return completion_logprobs(read_positions(positions, completion.target.tokenizer, completion.logprobs), offset)


def _prompt_tokens(completion: CompletionRequest, number: int, reported: int | None) -> int:
    return reported if reported is not None else completion.prompt_tokens[number] or 0


class _Stream:
    """The chunks of a streamed completion."""

    def __init__(self, completion: CompletionRequest, envelope: Envelope) -> None:
        self.completion = completion
        self.envelope = envelope
        self.choices: dict[int, Choice] = {}
        self.started: set[int] = set()  # choices whose first chunk (with the echoed prompt) went out
        self.reported: dict[int, int] = {}  # prompt position -> its token count as the model reported it

    async def chunks(
        self, first: tuple[int, Step] | None, steps: AsyncIterator[tuple[int, Step]]
    ) -> AsyncIterator[dict[str, Any]]:
        """Every chunk, from the ``first`` step on."""
        item = first
        while item is not None:
            number, step = item
            if step.input_tokens is not None:
                self.reported[number] = step.input_tokens
            for delta in step.deltas:
                index = number * self.completion.n + delta.index
                choice = self.choices.setdefault(index, Choice())
                echo = self.completion.prompts[number] if self.completion.echo and index not in self.started else ""
                offset = self._echo_length(number) + len(choice.text)
                self.started.add(index)
                choice.add(delta)
                if delta.text or echo or delta.finish_reason or delta.logprobs:
                    yield self._chunk(
                        {
                            "index": index,
                            "text": echo + delta.text,
                            "logprobs": _logprobs(self.completion, delta.logprobs, offset),
                            "finish_reason": finish_reason(delta.finish_reason) if delta.finish_reason else None,
                        }
                    )
            item = await anext(steps, None)
        if self.completion.include_usage:
            prompt_tokens = sum(
                _prompt_tokens(self.completion, number, self.reported.get(number))
                for number in range(len(self.completion.prompts))
            )
            generated = output_tokens(self.completion.target, list(self.choices.values()))
            yield self.envelope.wrap([], usage=usage(prompt_tokens, generated))

    def _echo_length(self, number: int) -> int:
        return len(self.completion.prompts[number]) if self.completion.echo else 0

    def _chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        extra = {"usage": None} if self.completion.include_usage else {}
        return self.envelope.wrap([choice], **extra)


def _prompts(target: Target, prompt: object) -> list[str]:
    """The prompts of a request: a string, a list of strings, token ids or lists of token ids."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(item, str) for item in prompt):
            return list(prompt)
        if all(_is_ids(item) for item in prompt):
            return [_decode(target, item) for item in prompt]
        if _is_ids(prompt):
            return [_decode(target, prompt)]
    raise invalid("'prompt' must be a string, a list of strings, a list of token ids or a list of those", "prompt")


def _is_ids(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, int) for item in value)


def _decode(target: Target, ids: list[int]) -> str:
    if target.tokenizer is None:
        raise invalid(f"model '{target.name}' has no tokenizer, so its prompts must be text", "prompt")
    return str(target.tokenizer.decode(ids))
