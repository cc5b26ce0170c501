"""What serving costs an LLM engine: naiad's streaming against the same engine driven in-process.

The tiny model of ``naiad_llm.testing`` (built on the spot, no download) on the transformers engine,
served by two naiad servers from Triton-style repositories. 16 concurrent clients each send their
share of the requests one after the other, greedy with ``ignore_eos`` so every request produces
exactly ``--max-tokens`` tokens. Each length gets its own measurement: 128 tokens (a short chat
answer; the targets are judged there) and 32, where the requests' round trips weigh four times as
much (all 16 requests start and end on the same steps, so each round the engine waits, idle, for
the 16 clients to receive their last token and send their next request):

* served, engine process: each client is a gRPC stream (``ModelStreamInfer``, ``stream: true``) of
  tritonclient's asyncio client, each on a channel of its own, to a server whose engine runs in a
  process of its own (the default). grpc's channels with the same settings to the same address share
  one HTTP/2 connection, so the 16 streams travel on one (perf_analyzer's C++ client puts up to six
  clients on each). The 16 clients share one event loop in this process, as LLM
  load generators do: a thread per stream (tritonclient's threaded client) costs the shared cores
  about twice the CPU per token;
* served: the same, with ``"engine_process": false``: the engine in the server process;
* alone: the same engine class with the same settings, in this process, 16 asyncio tasks calling
  ``Engine.generate`` with the same requests, with as many compute threads as naiad gives its engine
  process (one fewer than the CPUs, so the server keeps a core) on the same CPUs (this process's
  threads keep to them while it runs, as the engine process's do); "alone, every core" with torch's
  default, one thread per core on any, as the engine gets in the server process.

A shared machine's speed drifts (the engine alone's own tokens/s varies 1.5x between minutes here),
so each naiad server is measured right next to its engine alone, in turn first and second, and the
comparison is the median over rounds of each pair's ratio (and difference of median time to first
token). The per-driver table gives the medians over rounds of output tokens per second and of the
median time to first token. The server's CPU counts its engine process too.

    python benchmarks/llm.py [--rounds 3] [--requests 64] [--max-tokens 128 32]

Targets: served tokens/s at least 0.9x the engine alone; time to first token at most 5 ms more.
The engine alone keeps the machine's cores busy, so on a small machine the served side shares them
with its clients: the CPU columns (server, and the clients in this process) show where time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tritonclient.grpc.aio as aioclient
from harness import print_table, tree_cpu_seconds

from naiad.backend import new_event_loop
from naiad.testing import ServerProcess, start_server
from naiad_llm.engine import GenerationRequest
from naiad_llm.engines import create_engine
from naiad_llm.engines.process import child_environment, engine_cpus
from naiad_llm.repository import read_model_spec
from naiad_llm.sampling import parse_sampling
from naiad_llm.testing import CORPUS, build_tiny_model, write_model_repository

MODEL = "tiny"
CLIENTS = 16
BASELINES = {"served, engine process": "alone", "served": "alone, every core"}  # the same compute threads


@dataclass(frozen=True)
class Run:
    """One measurement: output tokens per second, each request's time to first token (seconds), and
    the CPU time the engine's process spent per 1000 tokens (machines here are shared: CPU time is
    what load on other processes changes least)."""

    tokens_per_s: float
    ttft: list[float]
    cpu_ms_per_1k: float
    client_cpu_ms_per_1k: float = 0.0  # served: what the 16 tritonclient streams in this process spent


def _prompts(requests: int) -> list[str]:
    return [CORPUS[index % len(CORPUS)] for index in range(requests)]


def _shares(prompts: list[str]) -> list[list[str]]:
    return [prompts[client::CLIENTS] for client in range(CLIENTS)]


def _tensor(name: str, value: Any, datatype: str) -> aioclient.InferInput:
    data = np.array([value], dtype=np.object_ if datatype == "BYTES" else bool)
    tensor = aioclient.InferInput(name, [1], datatype)
    tensor.set_data_from_numpy(data)
    return tensor


async def _client(url: str, prompts: list[str], sampling: str, ttft: list[float], tokens: list[int]) -> None:
    """One client: a gRPC stream on a channel of its own, its requests one after the other. Every
    request ends on its ``max_tokens``-th token, whose response carries the final flag."""
    if not prompts:  # fewer requests than clients
        return
    client = aioclient.InferenceServerClient(url)
    answered: asyncio.Queue[None] = asyncio.Queue()
    sent = 0.0

    async def requests() -> AsyncIterator[dict[str, Any]]:
        nonlocal sent
        for prompt in prompts:
            inputs = [
                _tensor("text_input", prompt.encode(), "BYTES"),
                _tensor("sampling_parameters", sampling.encode(), "BYTES"),
                _tensor("stream", True, "BOOL"),
                _tensor("return_num_output_tokens", True, "BOOL"),
            ]
            sent = time.perf_counter()
            yield {"model_name": MODEL, "inputs": inputs}
            await answered.get()

    try:
        first = None
        async for result, error in client.stream_infer(requests()):
            if error is not None:
                raise error
            count = result.as_numpy("num_output_tokens")
            if count is not None and int(count.sum()) > 0:
                tokens.append(int(count.sum()))
                first = first if first is not None else time.perf_counter() - sent
            if result.get_response().parameters["triton_final_response"].bool_param:
                assert first is not None, "a request produced no token"
                ttft.append(first)
                first = None
                if len(ttft) == len(prompts):
                    break
                answered.put_nowait(None)
    finally:
        await client.close()


async def _clients(url: str, prompts: list[str], sampling: str) -> tuple[list[float], list[int]]:
    ttft_by_client: list[list[float]] = [[] for _ in range(CLIENTS)]
    tokens: list[int] = []
    await asyncio.gather(
        *(_client(url, share, sampling, ttft_by_client[index], tokens) for index, share in enumerate(_shares(prompts)))
    )
    return [ttft for client in ttft_by_client for ttft in client], tokens


def served(server: ServerProcess, prompts: list[str], sampling: str) -> Run:
    cpu, clients_cpu, started = tree_cpu_seconds(server.process.pid), time.process_time(), time.perf_counter()
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        ttft, tokens = runner.run(_clients(server.grpc_url, prompts, sampling))
    elapsed, cpu = time.perf_counter() - started, tree_cpu_seconds(server.process.pid) - cpu
    clients_cpu = time.process_time() - clients_cpu
    assert len(ttft) == len(prompts), "a client lost a request"
    return Run(sum(tokens) / elapsed, ttft, cpu * 1e6 / sum(tokens), clients_cpu * 1e6 / sum(tokens))


@contextmanager
def keep_to(cpus: list[int] | None) -> Iterator[None]:
    """Every thread of this process on ``cpus`` (None: where it was) while the block runs."""
    if cpus is None:
        yield
        return
    threads = [int(thread) for thread in os.listdir("/proc/self/task")]
    everywhere = os.sched_getaffinity(0)
    for thread in threads:
        with suppress(ProcessLookupError):  # a thread that ended since the listing
            os.sched_setaffinity(thread, cpus)
    try:
        yield
    finally:
        for thread in threads:
            with suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(thread, everywhere)


async def alone(engine: Any, prompts: list[str], sampling: dict[str, Any]) -> Run:
    settings, _ = parse_sampling(sampling, strict=True)
    ttft: list[float] = []
    tokens = 0

    async def client(index: int, share: list[str]) -> None:
        nonlocal tokens
        for number, prompt in enumerate(share):
            sent = time.perf_counter()
            first = None
            request = GenerationRequest(f"alone-{index}-{number}-{sent}", prompt, settings)
            async for output in engine.generate(request):
                if output.token_ids and first is None:
                    first = time.perf_counter() - sent
                tokens += len(output.token_ids)
            assert first is not None, "a request produced no token"
            ttft.append(first)

    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client(index, share) for index, share in enumerate(_shares(prompts))))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return Run(tokens / elapsed, ttft, cpu * 1e6 / tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=64, help="requests per measurement, over 16 clients")
    parser.add_argument(
        "--max-tokens", type=int, nargs="+", default=[128, 32], help="each request's length; one table per length"
    )
    arguments = parser.parse_args()
    prompts = _prompts(arguments.requests)
    every_core = torch.get_num_threads()
    threads = {"alone": int(child_environment("cpu")["OMP_NUM_THREADS"]), "alone, every core": every_core}
    cpus = {"alone": engine_cpus("cpu"), "alone, every core": None}
    runs: dict[int, dict[str, list[Run]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_model(Path(folder) / "model")
        isolated, inside = Path(folder) / "isolated", Path(folder) / "inside"
        write_model_repository(isolated, MODEL, model)
        write_model_repository(inside, MODEL, model, engine_process=False)
        spec = read_model_spec("llm", MODEL, inside / MODEL / "1", "cpu")
        servers = {"served, engine process": start_server([isolated], timeout=300)}
        servers["served"] = start_server([inside], timeout=300)
        runner = asyncio.Runner(loop_factory=new_event_loop)
        engines = {}
        try:
            for name, count in threads.items():
                torch.set_num_threads(count)  # taken by the generation thread the engine starts
                engines[name] = create_engine(spec.engine, spec.settings)
                runner.run(engines[name].start())
            warm_up = {"max_tokens": 32, "temperature": 0, "ignore_eos": True}
            for server in servers.values():
                served(server, prompts[:CLIENTS], json.dumps(warm_up))
            for name, engine in engines.items():
                with keep_to(cpus[name]):
                    runner.run(alone(engine, prompts[:CLIENTS], warm_up))
            for length in arguments.max_tokens:
                sampling = {"max_tokens": length, "temperature": 0, "ignore_eos": True}
                runs[length] = {name: [] for name in [*engines, *servers]}
                for round_number in range(arguments.rounds):
                    for served_name, alone_name in BASELINES.items():
                        pair = [alone_name, served_name] if round_number % 2 == 0 else [served_name, alone_name]
                        for name in pair:
                            if name in engines:
                                with keep_to(cpus[name]):
                                    run = runner.run(alone(engines[name], prompts, sampling))
                            else:
                                run = served(servers[name], prompts, json.dumps(sampling))
                            runs[length][name].append(run)
        finally:
            for engine in engines.values():
                runner.run(engine.stop())
            runner.close()
            for server in servers.values():
                server.stop()
    for length, measured in runs.items():
        report(measured, f"{arguments.requests} requests of {length} tokens", arguments.rounds)
    print(
        f"alone: {threads['alone']} compute threads on CPUs {cpus['alone']}, as naiad gives its engine process "
        "(one fewer than the CPUs, the first left to the server); "
        f"alone, every core: torch's default ({threads['alone, every core']}), as the engine gets in the server process"
    )


def report(runs: dict[str, list[Run]], workload: str, rounds: int) -> None:
    """Print one workload's drivers, then naiad against the engine alone."""
    rows = []
    for name, measured in runs.items():
        throughput = statistics.median(run.tokens_per_s for run in measured)
        ttft_ms = statistics.median(statistics.median(run.ttft) * 1e3 for run in measured)
        cpu = statistics.median(run.cpu_ms_per_1k for run in measured)
        clients = statistics.median(run.client_cpu_ms_per_1k for run in measured)
        rows.append((name, throughput, ttft_ms, cpu, clients))
    print_table(
        f"{CLIENTS} streaming clients, {workload}, tiny model on the transformers engine (median of {rounds} rounds)",
        ["driver", "tokens/s", "TTFT p50 ms", "server CPU ms / 1k tokens", "client CPU ms / 1k tokens"],
        rows,
    )
    comparisons = []
    for name, baseline in BASELINES.items():
        pairs = list(zip(runs[name], runs[baseline], runs["alone, every core"], strict=True))
        comparisons.append(
            (
                name,
                baseline,
                statistics.median(run.tokens_per_s / alone.tokens_per_s for run, alone, _ in pairs),
                statistics.median(run.tokens_per_s / best.tokens_per_s for run, _, best in pairs),
                statistics.median(
                    (statistics.median(run.ttft) - statistics.median(alone.ttft)) * 1e3 for run, alone, _ in pairs
                ),
                statistics.median(run.cpu_ms_per_1k / alone.cpu_ms_per_1k for run, alone, _ in pairs),
                statistics.median(
                    (run.cpu_ms_per_1k + run.client_cpu_ms_per_1k) / alone.cpu_ms_per_1k for run, alone, _ in pairs
                ),
            )
        )
    print_table(
        f"{workload}: naiad against the engine alone with the same threads, measured next to it, median over "
        "rounds (targets: >= 0.9x tokens/s, <= 5 ms more TTFT p50)",
        [
            "driver",
            "against",
            "tokens/s ratio",
            "x alone, every core",
            "TTFT p50 overhead ms",
            "CPU ratio",
            "CPU ratio with the clients",
        ],
        comparisons,
    )


if __name__ == "__main__":
    main()
