"""The one small interface every engine implements: add a request, stream its tokens, cancel, report.

An engine batches at the iteration level: requests join and leave the running batch between
decoding steps, so a request never waits for others to finish. Everything here runs on the server's
event loop; an engine that computes on its own thread hands results back to the loop itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JSON_SCHEMA = "json_schema"  # EngineInfo.extra key: True when the engine enforces SamplingSettings.json_schema
LOAD_REFRESH_S = 0.01  # while tokens flow, an engine's load is read at most this often


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """How to sample one request, engine-neutral (vLLM's ``SamplingParams`` names).

    ``max_tokens`` None: as many as the model's context still allows. ``top_k`` 0 and ``min_p`` 0 are
    off. ``repetition_penalty`` scales the logits of every token seen (prompt and output);
    ``presence_penalty`` and ``frequency_penalty`` subtract from the logits of output tokens, once and
    per occurrence. ``stop`` strings end generation and are never part of the text; ``stop_token_ids`` likewise.
    ``min_tokens``: tokens generated before end-of-sequence, ``stop_token_ids`` or ``stop`` strings may
    end the output (vLLM's). ``logprobs``: how many top log-probabilities to return per token (None: none).
    ``json_schema``: constrain the output to this JSON schema (``{}`` for any JSON object).
    """

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    n: int = 1
    logprobs: int | None = None
    json_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One prompt to complete."""

    request_id: str
    prompt: str
    sampling: SamplingSettings = SamplingSettings()
    lora_name: str | None = None


@dataclass(slots=True)
class GenerationOutput:
    """What one request gained since its previous output (a streamed delta), and where it stands.

    ``finish_reason``: "stop" (end of sequence, a stop string or token), "length" (``max_tokens`` or
    the context), "abort" (cancelled); None while running. ``logprobs``: per new token, token id ->
    log-probability of the chosen token and the top alternatives.
    """

    text: str
    token_ids: Sequence[int]
    num_input_tokens: int
    num_output_tokens: int
    finished: bool = False
    finish_reason: str | None = None
    cumulative_logprob: float | None = None
    logprobs: list[dict[int, float]] | None = None


@dataclass(frozen=True, slots=True)
class EngineStats:
    """The engine's load right now (``vllm:num_requests_*``, ``vllm:kv_cache_usage_perc``)."""

    running: int
    waiting: int
    kv_cache_usage: float = 0.0


@dataclass(slots=True)
class EngineInfo:
    """What the server and the OpenAI frontend need to know about the loaded model."""

    model: str  # the folder or hub id it was loaded from
    max_model_len: int
    tokenizer: Any = None  # a Hugging Face tokenizer (chat templates, token counts), when the engine has one
    extra: dict[str, Any] = field(default_factory=dict)


class Engine(ABC):
    """An LLM engine with continuous batching, driven from the server's event loop."""

    @abstractmethod
    async def start(self) -> EngineInfo:
        """Load the model and start the engine loop; raise with a clear message if it cannot."""

    @abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
        """Add ``request`` to the running batch and yield its outputs until one is ``finished``.

        The engine hears of the request when this is called or when iteration starts; closing the
        iterator (``aclose``) before the finished output ends the request, iterated or not."""

    @abstractmethod
    async def abort(self, request_id: str) -> None:
        """Cancel a request: it leaves the batch and frees its slot at once (no-op if finished)."""

    @abstractmethod
    def stats(self) -> EngineStats:
        """The engine's current load."""

    def on_load_change(self, listener: Callable[[EngineStats], None]) -> None:
        """Call ``listener`` on the server loop whenever the engine learns of a new load. Only an
        engine that learns its load by message needs to; the others are read through :meth:`stats`."""
        del listener

    @abstractmethod
    async def stop(self) -> None:
        """Stop the engine and release the model (its memory, its threads)."""
