"""The vLLM engine: naiad's :class:`~naiad_llm.engine.Engine` on vLLM's ``AsyncLLM`` (its v1 engine).

vLLM batches, schedules and detokenizes, in an engine-core process of its own; this module hands it
naiad's requests (outputs as deltas: vLLM holds back text that may begin a stop string), aborts
them, reads the scheduler's load through a stat logger and serves the LoRA adapters of
``multi_lora.json`` by name. ``model.json`` holds vLLM's ``AsyncEngineArgs``, as for Triton's vLLM
backend. vLLM is imported when the engine starts, never before.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, MutableMapping
from contextlib import aclosing
from typing import Any

from naiad.backend import invalid_arg, unavailable
from naiad_llm.engine import (
    JSON_SCHEMA,
    Engine,
    EngineInfo,
    EngineStats,
    GenerationOutput,
    GenerationRequest,
    SamplingSettings,
)
from naiad_llm.engines import EngineSettings
from naiad_llm.engines._gpu_device import only_device, world_size
from naiad_llm.engines._gpu_outputs import finish_reason, logprob_dicts
from naiad_llm.engines._gpu_requests import lora_ids, lora_request, one_sequence, vllm_sampling_kwargs
from naiad_llm.engines._gpu_stats import VllmLoad


class VllmEngine(Engine):
    """One model version served by one vLLM ``AsyncLLM``."""

    def __init__(self, settings: EngineSettings) -> None:
        self._settings = settings
        self._loras = lora_ids(settings.lora_modules)
        self._load = VllmLoad()
        self._llm: Any = None

    async def start(self) -> EngineInfo:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        settings = self._settings
        args = {**settings.args, "model": settings.model}
        spawn_workers(os.environ)
        try:
            engine_args = AsyncEngineArgs(**args)
            with only_device(settings.device, world_size(args)):
                # Loading takes minutes and blocks: off the event loop. The output handler starts on
                # the loop with the first request.
                self._llm = await asyncio.to_thread(
                    AsyncLLM.from_engine_args, engine_args, stat_loggers=[self._load.factory]
                )
        except Exception as error:
            raise unavailable(
                f"model '{settings.model_name}': vLLM could not load {settings.model} "
                f"(vLLM needs a CUDA GPU and its engine arguments in model.json): {error}"
            ) from error
        tokenizer = self._llm.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # a coroutine before vLLM 0.11
            tokenizer = await tokenizer
        return EngineInfo(
            model=settings.model,
            max_model_len=int(self._llm.model_config.max_model_len),
            tokenizer=tokenizer,
            extra={JSON_SCHEMA: True},
        )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
        one_sequence(self._settings.model_name, request.sampling)
        params = self._sampling_params(request.sampling)
        lora = self._lora_request(request.lora_name)
        produced = 0
        stream = self._llm.generate(request.prompt, params, request.request_id, lora_request=lora)
        # aclosing: a consumer that stops early closes vLLM's stream, which aborts the request.
        async with aclosing(stream):
            try:
                async for output in stream:
                    completion = output.outputs[0]
                    produced += len(completion.token_ids)
                    yield GenerationOutput(
                        text=completion.text,
                        token_ids=list(completion.token_ids),
                        num_input_tokens=len(output.prompt_token_ids or ()),
                        num_output_tokens=produced,
                        finished=output.finished,
                        finish_reason=finish_reason(completion.finish_reason) if output.finished else None,
                        cumulative_logprob=completion.cumulative_logprob,
                        logprobs=logprob_dicts(completion.logprobs, completion.token_ids)
                        if request.sampling.logprobs is not None
                        else None,
                    )
            except ValueError as error:  # vLLM's request validation: a prompt too long, a bad setting
                raise invalid_arg(f"model '{self._settings.model_name}': {error}") from error

    async def abort(self, request_id: str) -> None:
        await self._llm.abort(request_id)

    def stats(self) -> EngineStats:
        return self._load.stats()

    async def stop(self) -> None:
        if self._llm is not None:
            llm, self._llm = self._llm, None
            llm.shutdown()  # on the loop that runs its output handler; waits for the engine process

    def _sampling_params(self, settings: SamplingSettings) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        kwargs = vllm_sampling_kwargs(settings)
        constraint = kwargs.pop("structured_outputs", None)
        if constraint is not None:
            kwargs.update(_structured_outputs(constraint))
        return SamplingParams(**kwargs, output_kind=RequestOutputKind.DELTA)

    def _lora_request(self, name: str | None) -> Any:
        return lora_request(self._settings.model_name, self._loras, name, _lora_request_class)


def _structured_outputs(constraint: dict[str, Any]) -> dict[str, Any]:
    """The ``SamplingParams`` field for a JSON constraint in this vLLM release's API."""
    from vllm import sampling_params

    if hasattr(sampling_params, "StructuredOutputsParams"):  # vLLM 0.11 and later
        return {"structured_outputs": sampling_params.StructuredOutputsParams(**constraint)}
    return {"guided_decoding": sampling_params.GuidedDecodingParams(**constraint)}


def create_engine(settings: EngineSettings) -> Engine:
    """The factory's entry point (:mod:`naiad_llm.engines`)."""
    return VllmEngine(settings)


def _lora_request_class() -> Any:
    from vllm.lora.request import LoRARequest

    return LoRARequest


WORKER_START_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"


def spawn_workers(environ: MutableMapping[str, str]) -> None:
    """Have vLLM spawn (not fork) its engine-core and worker processes, unless the operator chose.

    A process forked after CUDA was initialised in its parent cannot use CUDA ("Cannot re-initialize
    CUDA in forked subprocess"), and vLLM does not always notice that the parent did.
    """
    environ.setdefault(WORKER_START_METHOD, "spawn")
