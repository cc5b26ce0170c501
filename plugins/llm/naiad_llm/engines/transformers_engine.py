"""The transformers engine: Hugging Face transformers' own continuous batching, on CPU or GPU.

``model.init_continuous_batching`` gives a manager whose generation thread adds requests to the
running batch between decoding steps and hands each step's tokens to handlers on the event loop
that drives the engine (the server's, or its engine process's).
Sampling is per request through :class:`~naiad_llm.engines.sampler.RequestSampler`, and
``json_schema`` is enforced there through :mod:`~naiad_llm.engines.json_grammar`. Limits: one
sequence per request (the scheduler runs ``n`` requests for ``n`` choices), no LoRA adapters
(INVALID_ARG naming the field), and a seeded request gives the same text when it is computed alone or
in the same batch composition (the batch shape can change the model's floating-point results).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from naiad.backend import ErrorCode, NaiadError, invalid_arg
from naiad_llm.engine import JSON_SCHEMA, Engine, EngineInfo, EngineStats, GenerationOutput, GenerationRequest
from naiad_llm.engines import EngineSettings
from naiad_llm.engines.detokenizer import IncrementalDecoder
from naiad_llm.engines.json_grammar import JsonGrammar
from naiad_llm.engines.sampler import RequestSampler, RequestSampling, SamplerProcessors
from naiad_llm.stops import StopMatcher

logger = logging.getLogger(__name__)

MAX_LOGPROBS = 20
# model.json keys the engine takes, next to "engine" and "model" (vLLM's names where vLLM has one).
ARGUMENTS = {
    "dtype": "auto, float32, bfloat16 or float16 (default: float32 on CPU, the model's own on a GPU)",
    "max_model_len": "the context length (default: the model's max_position_embeddings)",
    "max_num_seqs": "most sequences in one batch",
    "max_num_batched_tokens": "most tokens in one batch",
    "num_blocks": "KV cache blocks (default: sized to the memory)",
    "block_size": "tokens per KV cache page",
    "revision": "the hub revision",
    "trust_remote_code": "run the model folder's own code",
    "attn_implementation": "sdpa, eager or a flash attention implementation",
}
_ABORTED = object()


class TransformersEngine(Engine):
    """One model version on transformers' ``ContinuousBatchingManager``."""

    def __init__(self, settings: EngineSettings) -> None:
        unknown = sorted(set(settings.args) - set(ARGUMENTS) - {"engine", "model"})
        if unknown:
            raise invalid_arg(
                f"model '{settings.model_name}': model.json has arguments the transformers engine does not take: "
                f"{', '.join(unknown)}; it takes {', '.join(sorted(ARGUMENTS))}"
            )
        if settings.lora_modules:
            raise invalid_arg(f"model '{settings.model_name}': the transformers engine does not serve LoRA adapters")
        self._settings = settings
        self._args = settings.args
        self._manager: Any = None
        self._tokenizer: Any = None
        self._sampler: RequestSampler | None = None
        self._grammar: JsonGrammar | None = None
        self._eos: tuple[int, ...] = ()
        self._max_model_len = 0
        self._queues: dict[str, asyncio.Queue[Any]] = {}
        self._new_manager: Callable[[], Any] = lambda: None  # set once the model is loaded

    async def start(self) -> EngineInfo:
        return await asyncio.to_thread(self._load)

    def _load(self) -> EngineInfo:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        args, name = self._args, self._settings.model_name
        device = torch.device(self._settings.device)
        common = {"revision": args.get("revision"), "trust_remote_code": bool(args.get("trust_remote_code", False))}
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self._settings.model, **common)
            model: Any = AutoModelForCausalLM.from_pretrained(
                self._settings.model,
                dtype=_dtype(args.get("dtype"), device),
                attn_implementation=args.get("attn_implementation", "sdpa"),
                **common,
            )
            model = model.to(device)
        except (OSError, ValueError) as error:
            raise NaiadError(
                f"model '{name}': transformers could not load '{self._settings.model}': {error}; "
                'point model.json\'s "model" at a Hugging Face model folder or hub id',
                ErrorCode.UNAVAILABLE,
            ) from error
        context: Any = args.get("max_model_len") or getattr(model.config, "max_position_embeddings", 2048)
        self._max_model_len = int(context)
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = self._tokenizer.eos_token_id
        self._eos = tuple(eos if isinstance(eos, list) else [] if eos is None else [eos])
        if self._eos:
            self._grammar = JsonGrammar(self._tokenizer, self._tokenizer.eos_token_id or self._eos[0])
        self._sampler = RequestSampler(device)
        generation = GenerationConfig(  # type: ignore[no-untyped-call]
            do_sample=False, eos_token_id=list(self._eos) or -1, max_new_tokens=16
        )
        batching = ContinuousBatchingConfig(
            use_cuda_graph=False,  # the per-request sampler runs Python on every step
            use_async_batching=False,
            max_memory_percent=0.8,
            **_cache_sizes(args, device.type, self._max_model_len),
        )
        self._new_manager = lambda: model.init_continuous_batching(
            generation_config=generation, continuous_batching_config=batching
        )
        self._start_manager()
        logger.info("model '%s': transformers engine serving %s on %s", name, self._settings.model, device)
        return EngineInfo(
            model=self._settings.model,
            max_model_len=self._max_model_len,
            tokenizer=self._tokenizer,
            extra={"device": str(device), "dtype": str(model.dtype), JSON_SCHEMA: self._grammar is not None},
        )

    def _start_manager(self) -> None:
        """A new manager with its generation thread, once its KV cache is allocated."""
        assert self._sampler is not None
        manager = self._new_manager()
        manager.logit_processor = SamplerProcessors(self._sampler)
        manager.start()
        while manager.batch_processor is None:  # the generation thread sizes and allocates the cache
            if not manager.is_running():
                raise NaiadError(
                    f"model '{self._settings.model_name}': the transformers engine stopped while starting; see the log"
                )
            time.sleep(0.01)
        self._manager = manager

    def _running_manager(self) -> Any:
        """The manager, started again if its generation thread died (an error it could not survive ended
        the requests it was running, each with that error): later requests are served, not left waiting."""
        if not self._manager.is_running():
            logger.error(
                "model '%s': the transformers generation thread stopped (the error is logged above); starting "
                "a new one",
                self._settings.model_name,
            )
            with contextlib.suppress(Exception):
                self._manager.stop(block=False)
            self._start_manager()
        return self._manager

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
        assert self._manager is not None, "the engine is not started"
        assert self._sampler is not None
        settings = request.sampling
        prompt_ids = list(self._tokenizer(request.prompt).input_ids)
        max_tokens = self._check(request, len(prompt_ids))
        manager = self._running_manager()
        eos = set(settings.stop_token_ids) | (set() if settings.ignore_eos else set(self._eos))
        guide = None
        if settings.json_schema is not None and self._grammar is not None:
            guide = await asyncio.to_thread(self._grammar.guide, settings.json_schema)
        sampling = self._sampler.add(request.request_id, settings, prompt_ids, guide, tuple(sorted(eos)))
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues[request.request_id] = queue
        manager.register_result_handler(request.request_id, queue.put_nowait)
        manager.add_request(
            prompt_ids,
            request_id=request.request_id,
            max_new_tokens=max_tokens,
            streaming=True,
            eos_token_id=sorted(eos) or -1,
        )
        stream = _TextStream(self._tokenizer, settings.stop, eos, settings.min_tokens)
        finished = False
        try:
            while not finished:
                result = await queue.get()
                while result is not _ABORTED and result.error is None and not result.is_finished() and queue.qsize():
                    result = queue.get_nowait()  # the reader fell behind: one output carries every new token
                if result is _ABORTED:
                    finished = True
                    yield stream.output(len(prompt_ids), sampling, finished=True, reason="abort")
                    return
                if result.error is not None:
                    raise NaiadError(
                        f"model '{self._settings.model_name}': generation failed: {result.error}", ErrorCode.INTERNAL
                    )
                stream.update(result.generated_tokens, final=result.is_finished())
                finished = result.is_finished() or stream.stopped
                reason = stream.finish_reason() if finished else None
                output = stream.output(len(prompt_ids), sampling, finished=finished, reason=reason)
                if finished and output.finish_reason == "stop" and not result.is_finished():
                    self._manager.cancel_request(request.request_id)  # a stop string ended it early
                yield output
        finally:
            if not finished:
                self._manager.cancel_request(request.request_id)
            self._forget(request.request_id)

    def _check(self, request: GenerationRequest, prompt_len: int) -> int:
        settings, name = request.sampling, self._settings.model_name
        if settings.n != 1:
            raise invalid_arg(f"model '{name}': the engine generates one sequence per request, not n={settings.n}")
        if settings.json_schema is not None and self._grammar is None:
            raise invalid_arg(
                f"model '{name}': sampling parameter 'json_schema' needs an end-of-sequence token, which "
                "this model's tokenizer and generation config do not name"
            )
        if request.lora_name is not None:
            raise invalid_arg(f"model '{name}': sampling parameter 'lora_name': this model serves no LoRA adapters")
        if prompt_len == 0:
            raise invalid_arg(f"model '{name}': the prompt is empty (it gives no tokens); send at least one token")
        if settings.logprobs is not None and settings.logprobs > MAX_LOGPROBS:
            raise invalid_arg(f"sampling parameter 'logprobs' must be at most {MAX_LOGPROBS}, got {settings.logprobs}")
        room = self._max_model_len - prompt_len
        if room < 1:
            raise invalid_arg(
                f"model '{name}': the prompt has {prompt_len} tokens; the context holds {self._max_model_len}"
            )
        if settings.max_tokens is not None and settings.max_tokens > room:
            raise invalid_arg(
                f"sampling parameter 'max_tokens' is {settings.max_tokens}, but model '{name}' has room for {room} "
                f"more tokens ({prompt_len} in the prompt, {self._max_model_len} in the context)"
            )
        return settings.max_tokens or room

    def _forget(self, request_id: str) -> None:
        self._queues.pop(request_id, None)
        if self._sampler is not None:
            self._sampler.remove(request_id)
        router = getattr(self._manager, "output_router", None)
        if router is not None:  # a cancelled request never gets its last output, which unregisters it
            with router._lock:
                router.result_handlers.pop(request_id, None)

    async def abort(self, request_id: str) -> None:
        queue = self._queues.get(request_id)
        if queue is None or self._manager is None:
            return
        self._manager.cancel_request(request_id)
        self._forget(request_id)
        queue.put_nowait(_ABORTED)

    def stats(self) -> EngineStats:
        live = len(self._queues)
        processor = getattr(self._manager, "batch_processor", None)
        if processor is None:
            return EngineStats(running=0, waiting=live)
        running = min(live, len(processor.scheduler.active_requests))
        usage = 0.0
        with contextlib.suppress(Exception):  # read while the generation thread steps; a stale value is fine
            usage = 1.0 - float(processor.cache.compute_free_capacity(relative=True))
        return EngineStats(running=running, waiting=live - running, kv_cache_usage=max(0.0, min(1.0, usage)))

    async def stop(self) -> None:
        for request_id in list(self._queues):
            await self.abort(request_id)
        if self._manager is not None:
            manager, self._manager = self._manager, None
            await asyncio.to_thread(manager.stop, block=True, timeout=30)


class _TextStream:
    """Turns a request's growing token list into text deltas, cut at stop strings."""

    def __init__(self, tokenizer: Any, stops: tuple[str, ...], stop_ids: set[int], min_tokens: int = 0) -> None:
        self._decoder = IncrementalDecoder(tokenizer)
        self._stops = StopMatcher(stops)
        self._stop_ids = stop_ids
        self._min_tokens = min_tokens  # stop strings count only from then on, as in vLLM
        self._tokens: list[int] = []
        self._sent_tokens = 0
        self._pending = ""
        self._cumulative = 0.0  # the log-probability of the tokens sent so far

    @property
    def stopped(self) -> bool:
        return self._stops.stopped

    def update(self, tokens: list[int], *, final: bool = False) -> None:
        self._tokens = list(tokens)
        visible = self._tokens[:-1] if self._tokens and self._tokens[-1] in self._stop_ids else self._tokens
        delta = self._decoder.delta(visible, final=final)
        self._pending += self._stops.feed(delta) if len(self._tokens) >= self._min_tokens else delta

    def finish_reason(self) -> str:
        if self._stops.stopped or (self._tokens and self._tokens[-1] in self._stop_ids):
            return "stop"
        return "length"

    def output(
        self, prompt_len: int, sampling: RequestSampling, *, finished: bool, reason: str | None
    ) -> GenerationOutput:
        if finished and not self._stops.stopped:
            self._pending += self._stops.flush()
        text, self._pending = self._pending, ""
        new = self._tokens[self._sent_tokens :]
        fresh = sampling.records[self._sent_tokens : len(self._tokens)]
        self._sent_tokens = len(self._tokens)
        self._cumulative += sum(record.logprob for record in fresh)
        wants = sampling.settings.logprobs is not None
        return GenerationOutput(
            text=text,
            token_ids=new,
            num_input_tokens=prompt_len,
            num_output_tokens=len(self._tokens),
            finished=finished,
            finish_reason=reason,
            cumulative_logprob=self._cumulative,
            logprobs=[{record.token: record.logprob, **record.top} for record in fresh] if wants else None,
        )


def _cache_sizes(args: dict[str, Any], device_type: str, max_model_len: int) -> dict[str, Any]:
    """KV-cache sizes from model.json. On a GPU transformers sizes the cache to the free memory; on the
    CPU (where that would take most of the RAM) the default holds 16 full-length sequences."""
    page_size = int(args.get("block_size", 256 if device_type != "cpu" else 32))
    sizes: dict[str, Any] = {
        "page_size": page_size,
        "max_requests_per_batch": args.get("max_num_seqs"),
        "max_batch_tokens": args.get("max_num_batched_tokens"),
        "num_blocks": args.get("num_blocks"),
    }
    if device_type == "cpu":
        sequences = int(sizes["max_requests_per_batch"] or 16)
        sizes["max_requests_per_batch"] = sequences
        sizes["max_batch_tokens"] = sizes["max_batch_tokens"] or max(512, min(max_model_len, 4096))
        sizes["num_blocks"] = sizes["num_blocks"] or sequences * -(-max_model_len // page_size)
    return sizes


def _dtype(name: Any, device: Any) -> Any:
    import torch

    if name in (None, "auto"):
        return torch.float32 if device.type == "cpu" else "auto"
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "half": torch.float16}
    if name not in dtypes:
        raise invalid_arg(f"model.json: dtype '{name}' is not one of auto, {', '.join(dtypes)}")
    return dtypes[name]


def create_engine(settings: EngineSettings) -> Engine:
    """The factory's entry point."""
    return TransformersEngine(settings)
