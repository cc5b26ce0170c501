"""vLLM's metric families, with the ``model`` and ``version`` labels Triton's vLLM backend gives them.

Histograms: time to first token, inter-token latency (also under Triton's older name,
``vllm:time_per_output_token_seconds``), end-to-end latency, prompt and generation tokens per request,
and ``n``. Gauges: running and waiting requests and KV-cache usage, refreshed on every engine event.
Counters: prompt and generation tokens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from naiad.backend import Metric, MetricFamily, ServerHandle
from naiad_llm.engine import EngineStats

# Bucket bounds as vLLM and Triton's vLLM backend use them.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
E2E_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
N_BUCKETS = (1, 2, 5, 10, 20)

_FAMILIES = {
    "ttft": ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "histogram"),
    "itl": ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "histogram"),
    "tpot": ("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", "histogram"),
    "e2e": ("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", "histogram"),
    "prompt_hist": ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", "histogram"),
    "generation_hist": ("vllm:request_generation_tokens", "Number of generation tokens processed.", "histogram"),
    "n": ("vllm:request_params_n", "Histogram of the n request parameter.", "histogram"),
    "running": ("vllm:num_requests_running", "Number of requests in model execution batches.", "gauge"),
    "waiting": ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge"),
    "kv": ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge"),
    "prompt": ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "counter"),
    "generation": ("vllm:generation_tokens_total", "Number of generation tokens processed.", "counter"),
}

_lock = threading.Lock()
_open: dict[str, MetricFamily] = {}


def families(server: ServerHandle) -> dict[str, MetricFamily]:
    """The families on ``server``'s metrics endpoint, registered on first use."""
    with _lock:
        if not _open:
            for key, (name, description, kind) in _FAMILIES.items():
                _open[key] = server.metrics.family(name, description, kind)
        return dict(_open)


def close_families() -> None:
    """Stop exporting the families (the server is stopping)."""
    with _lock:
        for family in _open.values():
            family.close()
        _open.clear()


def token_buckets(max_model_len: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_model_len`` (vLLM's token-count buckets)."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return buckets
            buckets.append(value)
        exponent += 1


@dataclass(slots=True)
class RequestTimer:
    """One request's timestamps (``time.monotonic``) for the latency histograms."""

    arrived: float
    last_token: float | None = None


class ModelMetrics:
    """The series of one model version."""

    def __init__(self, server: ServerHandle, model: str, version: int, max_model_len: int) -> None:
        labels = {"model": model, "version": str(version)}
        self._families = families(server)
        token = token_buckets(max_model_len)
        buckets: dict[str, tuple[float, ...] | list[float]] = {
            "ttft": TTFT_BUCKETS,
            "itl": ITL_BUCKETS,
            "tpot": ITL_BUCKETS,
            "e2e": E2E_BUCKETS,
            "prompt_hist": token,
            "generation_hist": token,
            "n": N_BUCKETS,
        }
        self._series: dict[str, Metric] = {
            key: family.metric(labels, buckets=buckets.get(key)) for key, family in self._families.items()
        }

    def tokens(self, timer: RequestTimer, now: float, new_tokens: int, first: bool, prompt_tokens: int) -> None:
        """``new_tokens`` arrived at ``now``; ``first``: the request's first output."""
        series = self._series
        if first:
            series["ttft"].observe(now - timer.arrived)
            series["prompt"].increment(prompt_tokens)
        elif timer.last_token is not None and new_tokens:
            gap = (now - timer.last_token) / new_tokens
            for _ in range(new_tokens):
                series["itl"].observe(gap)
                series["tpot"].observe(gap)
        if new_tokens:
            series["generation"].increment(new_tokens)
            timer.last_token = now

    def finished(self, timer: RequestTimer, now: float, prompt_tokens: int, output_tokens: int, n: int) -> None:
        """The request ended after generating ``output_tokens``."""
        self._series["e2e"].observe(now - timer.arrived)
        self._series["prompt_hist"].observe(prompt_tokens)
        self._series["generation_hist"].observe(output_tokens)
        self._series["n"].observe(n)

    def load(self, stats: EngineStats) -> None:
        """The engine's current load."""
        self._series["running"].set(stats.running)
        self._series["waiting"].set(stats.waiting)
        self._series["kv"].set(stats.kv_cache_usage)

    def close(self) -> None:
        """Drop this version's series (it unloads)."""
        for key, metric in self._series.items():
            self._families[key].remove(metric)
