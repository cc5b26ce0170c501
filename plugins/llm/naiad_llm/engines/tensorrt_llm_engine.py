"""The TensorRT-LLM engine: naiad's :class:`~naiad_llm.engine.Engine` on TensorRT-LLM's LLM API.

``tensorrt_llm.LLM`` (its PyTorch backend) batches in flight and streams each request through
``generate_async(..., streaming=True)``; this module turns its cumulative outputs into deltas cut at
stop strings, aborts requests through their results, and reads the engine's load from its
iteration stats when ``model.json`` turns them on (``"enable_iter_perf_stats": true``). Every other
``model.json`` key is an argument of ``LLM``. TensorRT-LLM is imported when the engine starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from naiad.backend import invalid_arg, unavailable
from naiad_llm.engine import JSON_SCHEMA, Engine, EngineInfo, EngineStats, GenerationOutput, GenerationRequest
from naiad_llm.engines import EngineSettings
from naiad_llm.engines._gpu_device import only_device, world_size
from naiad_llm.engines._gpu_outputs import TextStream, finish_reason, logprob_dicts
from naiad_llm.engines._gpu_requests import lora_ids, lora_request, one_sequence, trtllm_sampling_kwargs
from naiad_llm.engines._gpu_stats import trtllm_engine_stats

STATS_PERIOD_S = 1.0  # how often the iteration stats are read
STATS_WAIT_S = 0.05  # how long one read waits for a new record (some releases wait on the event loop)

_logger = logging.getLogger(__name__)


class TensorRTLLMEngine(Engine):
    """One model version served by one ``tensorrt_llm.LLM``."""

    def __init__(self, settings: EngineSettings) -> None:
        self._settings = settings
        self._loras = lora_ids(settings.lora_modules)
        self._llm: Any = None
        self._tokenizer: Any = None
        self._max_model_len = 0
        self._running: dict[str, Any] = {}  # request id -> TensorRT-LLM's result, to abort it
        self._latest: EngineStats | None = None
        self._stats_task: asyncio.Task[None] | None = None

    async def start(self) -> EngineInfo:
        import tensorrt_llm

        settings = self._settings
        try:
            with only_device(settings.device, world_size(settings.args)):
                # Loading takes minutes and blocks: off the event loop.
                self._llm = await asyncio.to_thread(tensorrt_llm.LLM, **{**settings.args, "model": settings.model})
            self._max_model_len = await asyncio.to_thread(self._context_length)
        except Exception as error:
            raise unavailable(
                f"model '{settings.model_name}': TensorRT-LLM could not load {settings.model} "
                f"(TensorRT-LLM needs an NVIDIA GPU and its LLM arguments in model.json): {error}"
            ) from error
        wrapper = self._llm.tokenizer
        self._tokenizer = getattr(wrapper, "tokenizer", wrapper)  # the Hugging Face tokenizer inside
        if settings.args.get("enable_iter_perf_stats"):
            self._stats_task = asyncio.create_task(self._read_stats())
        return EngineInfo(
            model=settings.model,
            max_model_len=self._max_model_len,
            tokenizer=self._tokenizer,
            extra={JSON_SCHEMA: bool(settings.args.get("guided_decoding_backend"))},
        )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
        model_name = self._settings.model_name
        sampling = request.sampling
        one_sequence(model_name, sampling)
        if sampling.json_schema is not None and not self._settings.args.get("guided_decoding_backend"):
            raise invalid_arg(
                f"model '{model_name}' cannot follow a JSON schema: "
                'set "guided_decoding_backend": "xgrammar" in its model.json'
            )
        prompt: str | list[int] = request.prompt
        max_tokens = sampling.max_tokens
        if max_tokens is None:  # what the context leaves: count the prompt once, hand over its tokens
            prompt = list(self._tokenizer.encode(request.prompt))
            max_tokens = max(1, self._max_model_len - len(prompt))
        try:
            result = self._llm.generate_async(
                prompt,
                sampling_params=self._sampling_params(trtllm_sampling_kwargs(sampling, max_tokens)),
                lora_request=self._lora_request(request.lora_name),
                streaming=True,
            )
        except ValueError as error:  # TensorRT-LLM's request checks: a prompt too long, a bad setting
            raise invalid_arg(f"model '{model_name}': {error}") from error
        self._running[request.request_id] = result
        text = TextStream(sampling.stop)
        sent = 0  # output tokens sent so far
        try:
            async for output in result:
                completion = output.outputs[0]
                finished = bool(output.finished)
                delta = text.update(completion.text, finished)
                token_ids = list(completion.token_ids[sent:])
                logprobs = completion.logprobs[sent : sent + len(token_ids)] if sampling.logprobs is not None else None
                sent = max(sent, len(completion.token_ids))
                done = finished or text.stopped  # a stop string the engine's token matching missed ends it too
                yield GenerationOutput(
                    text=delta,
                    token_ids=token_ids,
                    num_input_tokens=len(output.prompt_token_ids),
                    num_output_tokens=len(completion.token_ids),
                    finished=done,
                    finish_reason=_finish(completion.finish_reason, text.stopped) if done else None,
                    cumulative_logprob=completion.cumulative_logprob,
                    logprobs=logprob_dicts(logprobs, token_ids),
                )
                if done:
                    return
        finally:
            self._running.pop(request.request_id, None)
            if not result.finished and not result.aborted():  # the consumer left early, or a stop string
                result.abort()

    async def abort(self, request_id: str) -> None:
        result = self._running.get(request_id)
        if result is not None:
            result.abort()  # its stream ends with finish reason "cancelled"

    def stats(self) -> EngineStats:
        if self._latest is not None:
            return self._latest
        return EngineStats(running=len(self._running), waiting=0)

    async def stop(self) -> None:
        if self._stats_task is not None:
            self._stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stats_task
        if self._llm is not None:
            llm, self._llm = self._llm, None
            await asyncio.to_thread(llm.shutdown)

    async def _read_stats(self) -> None:
        """Keep the latest iteration stats, read every ``STATS_PERIOD_S``; give up if the engine has none."""
        try:
            while True:
                async for record in self._llm.get_stats_async(timeout=STATS_WAIT_S):
                    self._latest = trtllm_engine_stats(record)
                if not self._running:
                    self._latest = None  # idle: no records come, and the last one is stale
                await asyncio.sleep(STATS_PERIOD_S)
        except Exception:
            _logger.exception(
                "model '%s': TensorRT-LLM gives no iteration stats; reporting request counts instead",
                self._settings.model_name,
            )
            self._latest = None

    def _context_length(self) -> int:
        """``max_seq_len`` from the LLM arguments, else the model's ``max_position_embeddings``."""
        configured = getattr(self._llm.args, "max_seq_len", None)
        if configured:
            return int(configured)
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(
            self._settings.model, trust_remote_code=bool(self._settings.args.get("trust_remote_code", False))
        )
        return int(config.max_position_embeddings)

    @staticmethod
    def _sampling_params(kwargs: dict[str, Any]) -> Any:
        from tensorrt_llm import SamplingParams
        from tensorrt_llm.sampling_params import GuidedDecodingParams

        constraint = kwargs.pop("guided_decoding", None)
        if constraint is not None:
            kwargs["guided_decoding"] = GuidedDecodingParams(**constraint)
        return SamplingParams(**kwargs)

    def _lora_request(self, name: str | None) -> Any:
        return lora_request(self._settings.model_name, self._loras, name, _lora_request_class)


def _finish(reason: object, stopped_by_text: bool) -> str:
    return "stop" if stopped_by_text else finish_reason(reason)


def create_engine(settings: EngineSettings) -> Engine:
    """The factory's entry point (:mod:`naiad_llm.engines`)."""
    return TensorRTLLMEngine(settings)


def _lora_request_class() -> Any:
    from tensorrt_llm.executor import LoRARequest

    return LoRARequest
