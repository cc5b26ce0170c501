"""How long a python model with several process instances takes to load, next to the same model in threads.

The python ``add_sub`` model with ``count: N`` instances is loaded and unloaded through the repository
API (``--model-control-mode explicit``) in one server, alternating ``INSTANCE_ISOLATION: "process"``
(a worker per instance, forked from the python backend's template process) and ``"thread"``; the table
gives the median load time of each and what a process instance adds over a thread instance:

    python benchmarks/worker_start.py [--instances 8] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tritonclient.http as httpclient
from harness import print_table
from vs_triton import ADD_SUB, CONFIG

from naiad.testing import ModelRepositoryBuilder, start_server

MODES = ("thread", "process")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        repository = ModelRepositoryBuilder(Path(folder))
        for mode in MODES:
            config = (
                CONFIG.replace('name: "add_sub"', f'name: "add_sub_{mode}"').replace(
                    "count: 1", f"count: {args.instances}"
                )
                + f'parameters {{ key: "INSTANCE_ISOLATION" value: {{ string_value: "{mode}" }} }}\n'
            )
            repository.add_python_model(f"add_sub_{mode}", ADD_SUB, config)
        server = start_server([repository.root], "--model-control-mode=explicit")
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=600)
        seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
        try:
            for _ in range(args.repeats):
                for mode in MODES:
                    started = time.perf_counter()
                    client.load_model(f"add_sub_{mode}")
                    seconds[mode].append(time.perf_counter() - started)
                    client.unload_model(f"add_sub_{mode}", unload_dependents=False)
        finally:
            client.close()
            server.stop()
    thread, process = (statistics.median(seconds[mode]) for mode in MODES)
    rows = [
        ["thread", args.instances, f"{thread * 1000:.0f}", ""],
        ["process", args.instances, f"{process * 1000:.0f}", f"{(process - thread) / args.instances * 1000:.1f}"],
    ]
    print_table(
        "python model load time", ["isolation", "instances", "load ms (median)", "ms added per process instance"], rows
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
