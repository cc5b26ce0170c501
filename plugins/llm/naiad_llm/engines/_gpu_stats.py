"""The GPU engines' load as :class:`~naiad_llm.engine.EngineStats`: running, waiting, KV-cache use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from naiad_llm.engine import EngineStats


class VllmLoad:
    """A vLLM stat logger that keeps the latest scheduler stats of each engine core.

    vLLM calls ``factory(vllm_config, engine_index)`` once per engine core (several with data
    parallelism) and then ``record`` after every step, on the event loop that runs the engine.
    """

    def __init__(self) -> None:
        self._latest: dict[int, EngineStats] = {}

    def factory(self, vllm_config: Any, engine_index: int = 0) -> _VllmCoreLogger:
        """vLLM's per-engine stat logger factory."""
        return _VllmCoreLogger(self._latest, engine_index)

    def stats(self) -> EngineStats:
        """Running and waiting requests over every engine core, and their mean KV-cache use."""
        cores = list(self._latest.values())
        if not cores:
            return EngineStats(running=0, waiting=0)
        return EngineStats(
            running=sum(core.running for core in cores),
            waiting=sum(core.waiting for core in cores),
            kv_cache_usage=sum(core.kv_cache_usage for core in cores) / len(cores),
        )


class _VllmCoreLogger:
    """One engine core's logger: the methods vLLM's stat-logger manager calls."""

    def __init__(self, latest: dict[int, EngineStats], engine_index: int) -> None:
        self._latest = latest
        self._engine_index = engine_index

    def record(self, scheduler_stats: Any, iteration_stats: Any, *_: Any, **__: Any) -> None:
        """Keep the scheduler's numbers (later vLLM releases pass more arguments, unused here)."""
        if scheduler_stats is not None:
            self._latest[self._engine_index] = EngineStats(
                running=int(scheduler_stats.num_running_reqs),
                waiting=int(scheduler_stats.num_waiting_reqs),
                kv_cache_usage=float(scheduler_stats.kv_cache_usage),
            )

    def log(self) -> None:
        """vLLM's periodic log line: naiad reports through its metrics instead."""

    def log_engine_initialized(self) -> None:
        """Called once the KV cache is sized; nothing to do."""

    def record_sleep_state(self, sleep: int = 0, level: int = 0) -> None:
        """vLLM's sleep mode; naiad does not use it."""


def trtllm_engine_stats(record: Mapping[str, Any] | str) -> EngineStats:
    """EngineStats from one TensorRT-LLM iteration-stats record (``LLM.get_stats_async``; JSON in some releases)."""
    stats: Mapping[str, Any] = json.loads(record) if isinstance(record, str) else record
    batching = stats.get("inflightBatchingStats") or {}
    kv_cache = stats.get("kvCacheStats") or {}
    blocks = int(kv_cache.get("maxNumBlocks", 0))
    used = int(kv_cache.get("usedNumBlocks", blocks - int(kv_cache.get("freeNumBlocks", blocks))))
    return EngineStats(
        running=int(stats.get("numActiveRequests", 0)),
        waiting=int(stats.get("numQueuedRequests", 0)) + int(batching.get("numPausedRequests", 0)),
        kv_cache_usage=used / blocks if blocks else 0.0,
    )
