"""What the process boundary costs a python model per request, with no network in the way.

The python ``add_sub`` model (FP32 [16], dynamic batching) runs in naiad's embedded server (no HTTP,
no gRPC) twice: with ``INSTANCE_ISOLATION: "thread"`` and with ``"process"``. Bursts of N requests
are submitted together from the server's event loop, so they reach the model as one batch of N; the
two models are measured in turns, and the table gives the median CPU time per request of the whole
process tree (the worker included) and what the boundary adds, per request, at each batch size:
how much of the boundary is paid per batch and how much per request.

    python benchmarks/isolation_boundary.py [--repeats 5] [--requests 3200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import print_table, tree_cpu_seconds
from isolation import PROCESS, THREAD
from vs_triton import ADD_SUB, CONFIG

from naiad.embedded.server import Server
from naiad.testing import ModelRepositoryBuilder

ISOLATION = {"thread": THREAD, "process": PROCESS}  # the config parameter of each mode
MODES = tuple(ISOLATION)
BATCHES = (1, 8, 32)


def _config(mode: str) -> str:
    return CONFIG.replace('name: "add_sub"', f'name: "add_sub_{mode}"') + ISOLATION[mode]


def _executions(server: Server, model: str) -> int:
    return int(server.model_statistics(model)["model_stats"][0]["execution_count"])


def _measure(server: Server, model: str, batch: int, requests: int) -> tuple[float, float]:
    """CPU microseconds per request over ``requests`` requests sent in bursts of ``batch``, and the
    requests per execution of the model meanwhile."""
    row = np.arange(16, dtype=np.float32).reshape(1, 16)

    async def bursts(count: int) -> None:
        for _ in range(count):
            answers = await asyncio.gather(
                *(server.infer_async(model, {"INPUT0": row, "INPUT1": row}) for _ in range(batch))
            )
            if answers[-1]["OUTPUT0"][0, 1] != 2.0:
                raise RuntimeError(f"{model} answered {answers[-1]['OUTPUT0']}, not 2 * INPUT0")

    count = max(1, requests // batch)
    server._loop_run(bursts(max(1, count // 10)))  # warm up
    executions, before = _executions(server, model), tree_cpu_seconds(os.getpid())
    server._loop_run(bursts(count))
    cpu = tree_cpu_seconds(os.getpid()) - before
    return cpu / (count * batch) * 1e6, count * batch / (_executions(server, model) - executions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3200, help="requests per measurement")
    args = parser.parse_args()
    runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        builder = ModelRepositoryBuilder(Path(folder))
        for mode in MODES:
            builder.add_python_model(f"add_sub_{mode}", ADD_SUB, _config(mode))
        with Server(folder) as server:
            started = time.monotonic()
            for _ in range(args.repeats):
                for batch in BATCHES:
                    for mode in MODES:
                        runs.setdefault((mode, batch), []).append(
                            _measure(server, f"add_sub_{mode}", batch, args.requests)
                        )
    rows = []
    for batch in BATCHES:
        thread, process = (statistics.median(cpu for cpu, _ in runs[(mode, batch)]) for mode in MODES)
        sizes = "/".join(f"{statistics.median(size for _, size in runs[(mode, batch)]):.1f}" for mode in MODES)
        rows.append(
            [batch, sizes, f"{thread:.0f}", f"{process:.0f}", f"{process - thread:.0f}", f"{process / thread:.2f}"]
        )
    print_table(
        f"python add_sub in the embedded server, CPU us per request, median of {args.repeats}",
        ["burst", "requests/execution", "thread", "process", "boundary", "process / thread"],
        rows,
    )
    print(f"requests/execution: thread/process; {time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
