"""naiad-llm's vLLM engine on a CUDA GPU, against vLLM itself. Run by ``llm_engines.sh``.

    python llm_engines.py check --model MODEL      # naiad vs LLM.generate, gRPC streaming, vs vllm serve
    python llm_engines.py reference --model MODEL --output FILE  # vLLM's greedy texts as JSON (check's subprocess)

``--engine-arg KEY=VALUE`` (repeatable; VALUE is JSON, else a string) adds an engine argument to all
three (``LLM``, naiad's ``model.json``, ``vllm serve``), e.g. ``--engine-arg enforce_eager=true``.

Every check prints ``PASS <what>`` or ``FAIL <what>: <why>``; ``check`` exits 1 after any FAIL.
"""

from __future__ import annotations

import argparse
import json
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPTS = (
    "The capital of France is",
    "Write one sentence about rivers:",
    "List three prime numbers:",
    "def fibonacci(n):",
)
MAX_TOKENS = 32
ENGINE_ARGS = {"gpu_memory_utilization": 0.4, "max_model_len": 2048}
CLIENTS = 16
LOAD_REQUESTS = 128
LOAD_TOKENS = 128
NAME = "llm"
failures: list[str] = []


def parse_engine_arg(option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON where it is JSON (``true``, ``0.3``), else as a string."""
    key, separator, text = option.partition("=")
    if not separator or not key:
        raise SystemExit(f"--engine-arg {option!r}: expected KEY=VALUE, e.g. enforce_eager=true")
    try:
        return key, json.loads(text)
    except json.JSONDecodeError:
        return key, text


def engine_arg_options(engine_args: dict[str, Any]) -> list[str]:
    """The ``--engine-arg`` options that pass ``engine_args`` on to the ``reference`` subprocess."""
    return [option for key, value in engine_args.items() for option in ("--engine-arg", f"{key}={json.dumps(value)}")]


def serve_flags(engine_args: dict[str, Any]) -> list[str]:
    """``vllm serve`` options: ``--key value``, a true boolean as ``--key`` and a false one as ``--no-key``."""
    flags: list[str] = []
    for key, value in engine_args.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            flags += [f"--{flag}", value if isinstance(value, str) else json.dumps(value)]
    return flags


def report(what: str, ok: bool, why: str = "") -> None:
    print(f"PASS {what}" if ok else f"FAIL {what}: {why}", flush=True)
    if not ok:
        failures.append(what)


def reference(model: str, engine_args: dict[str, Any], output: Path) -> None:
    """vLLM's own greedy completions, one prompt at a time (so no batching differs from naiad's), as
    JSON in ``output`` (vLLM logs to stdout, so stdout cannot carry them)."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, **engine_args)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0)
    texts = [llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].text for prompt in PROMPTS]
    output.write_text(json.dumps(texts))


def _repository(root: Path, model: str, engine_args: dict[str, Any]) -> Path:
    """A Triton vLLM-backend repository, exactly as Triton's samples lay it out."""
    folder = root / NAME
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text('backend: "vllm"\ninstance_group [ { count: 1 kind: KIND_MODEL } ]\n')
    (folder / "1" / "model.json").write_text(json.dumps({"model": model, **engine_args}))
    return root


class Stream:
    """One tritonclient gRPC stream; ``send`` one request and get its responses' texts and timings."""

    def __init__(self, url: str) -> None:
        import tritonclient.grpc as grpcclient

        self._grpc = grpcclient
        self._responses: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.client = grpcclient.InferenceServerClient(url)
        self.client.start_stream(callback=self._received)

    def _received(self, result: Any, error: Any) -> None:
        self._responses.put((time.perf_counter(), error or result))

    def _input(self, name: str, value: Any, datatype: str) -> Any:
        import numpy as np

        tensor = self._grpc.InferInput(name, [1], datatype)
        tensor.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return tensor

    def send(self, prompt: str, sampling: dict[str, Any]) -> tuple[list[str], float, float]:
        """The text pieces, the time to the first piece and to the last response (seconds)."""
        inputs = [
            self._input("text_input", prompt.encode(), "BYTES"),
            self._input("sampling_parameters", json.dumps(sampling).encode(), "BYTES"),
            self._input("stream", True, "BOOL"),
        ]
        sent = time.perf_counter()
        self.client.async_stream_infer(NAME, inputs, enable_empty_final_response=True)
        pieces: list[str] = []
        first = 0.0
        while True:
            received, result = self._responses.get(timeout=300)
            if isinstance(result, Exception):
                raise result
            text = result.as_numpy("text_output")
            if text is not None and text[0]:
                pieces.append(text[0].decode())
                first = first or received - sent
            if result.get_response().parameters["triton_final_response"].bool_param:
                return pieces, first, received - sent

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


def load(run_one: Callable[[int, int], tuple[float, float]]) -> tuple[float, float]:
    """``CLIENTS`` threads share ``LOAD_REQUESTS`` requests: tokens/s and the median time to first token.

    ``run_one(client, index)`` runs request ``index`` as client number ``client`` and returns its time
    to first token and its total time.
    """
    ttfts: list[float] = []
    lock = threading.Lock()
    counter = iter(range(LOAD_REQUESTS))

    def client(number: int) -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            ttft, _ = run_one(number, index)
            with lock:
                ttfts.append(ttft)

    threads = [threading.Thread(target=client, args=(number,)) for number in range(CLIENTS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if len(ttfts) != LOAD_REQUESTS:
        raise RuntimeError(f"only {len(ttfts)} of {LOAD_REQUESTS} requests completed")
    return LOAD_REQUESTS * LOAD_TOKENS / elapsed, statistics.median(ttfts)


def naiad_checks(model: str, engine_args: dict[str, Any], expected: list[str]) -> tuple[float, float]:
    from naiad.testing import start_server

    sampling = {"max_tokens": MAX_TOKENS, "temperature": 0}
    load_sampling = {"max_tokens": LOAD_TOKENS, "temperature": 0, "ignore_eos": True}
    with tempfile.TemporaryDirectory() as folder:
        server = start_server([_repository(Path(folder), model, engine_args)], timeout=900)
        try:
            stream = Stream(server.grpc_url)
            try:
                results = [stream.send(prompt, sampling) for prompt in PROMPTS]
            finally:
                stream.close()
            texts = ["".join(pieces) for pieces, _, _ in results]
            mismatched = [index for index, (got, want) in enumerate(zip(texts, expected, strict=True)) if got != want]
            report(
                "greedy text through naiad (backend vllm) equals vLLM's LLM.generate",
                not mismatched,
                "; ".join(f"{PROMPTS[i]!r}: naiad {texts[i]!r} != vLLM {expected[i]!r}" for i in mismatched),
            )
            pieces_per_request = [len(pieces) for pieces, _, _ in results]
            report(
                "gRPC streaming sends each completion as several responses, then the final flag",
                all(count > 1 for count in pieces_per_request),
                f"text pieces per request: {pieces_per_request}",
            )
            streams = [Stream(server.grpc_url) for _ in range(CLIENTS)]
            try:

                def naiad_one(client: int, index: int) -> tuple[float, float]:
                    _, first, total = streams[client].send(PROMPTS[index % len(PROMPTS)], load_sampling)
                    return first, total

                load(naiad_one)  # warm-up: CUDA graphs, allocator
                return load(naiad_one)
            finally:
                for each in streams:
                    each.close()
        finally:
            server.stop()


def vllm_serve_load(model: str, engine_args: dict[str, Any], venv_bin: Path) -> tuple[float, float]:
    """The same load against ``vllm serve`` (OpenAI completions, streamed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(venv_bin / "vllm"), "serve", model, "--host", "127.0.0.1", "--port", str(port)]
    command += serve_flags(engine_args)
    log = tempfile.NamedTemporaryFile(prefix="vllm-serve-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 900
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not start; see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(2)

        def one(client: int, index: int) -> tuple[float, float]:
            body = {
                "model": model,
                "prompt": PROMPTS[index % len(PROMPTS)],
                "max_tokens": LOAD_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
                "stream": True,
            }
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/completions",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            sent = time.perf_counter()
            first = 0.0
            with urllib.request.urlopen(request, timeout=300) as response:
                for line in response:
                    if line.startswith(b"data: {") and json.loads(line[6:])["choices"][0]["text"]:
                        first = first or time.perf_counter() - sent
            return first, time.perf_counter() - sent

        load(one)
        return load(one)
    finally:
        process.terminate()
        process.wait(120)


def check(model: str, engine_args: dict[str, Any]) -> int:
    import torch

    report("a CUDA device is visible", torch.cuda.is_available(), "torch.cuda.is_available() is false")
    if failures:
        return 1
    print(f"device: {torch.cuda.get_device_name(0)}, model: {model}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "reference.json"
        command = [sys.executable, __file__, "reference", "--model", model, "--output", str(output)]
        produced = subprocess.run(
            [*command, *engine_arg_options(engine_args)], capture_output=True, text=True, check=False
        )
        if produced.returncode or not output.exists():
            report("vLLM's LLM.generate ran", False, (produced.stdout + produced.stderr)[-4000:])
            return 1
        expected = json.loads(output.read_text())
    naiad_tps, naiad_ttft = naiad_checks(model, engine_args, expected)
    serve_tps, serve_ttft = vllm_serve_load(model, engine_args, Path(sys.executable).parent)
    print(
        f"load: {CLIENTS} streaming clients, {LOAD_REQUESTS} requests of {LOAD_TOKENS} tokens\n"
        f"  naiad (vllm engine, gRPC stream): {naiad_tps:.0f} tokens/s, TTFT p50 {naiad_ttft * 1e3:.1f} ms\n"
        f"  vllm serve (OpenAI, SSE):         {serve_tps:.0f} tokens/s, TTFT p50 {serve_ttft * 1e3:.1f} ms",
        flush=True,
    )
    report(
        "naiad's tokens/s is at least 0.9x vllm serve's on the same model",
        naiad_tps >= 0.9 * serve_tps,
        f"{naiad_tps / serve_tps:.2f}x",
    )
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["check", "reference"])
    parser.add_argument("--model", required=True, help="a hub id or folder vLLM can load")
    parser.add_argument(
        "--engine-arg", action="append", default=[], metavar="KEY=VALUE", help="an engine argument for all three"
    )
    parser.add_argument("--output", type=Path, help="reference: the file that receives the texts")
    arguments = parser.parse_args()
    engine_args = {**ENGINE_ARGS, **dict(parse_engine_arg(option) for option in arguments.engine_arg)}
    if arguments.command == "reference":
        if arguments.output is None:
            parser.error("reference needs --output FILE")
        reference(arguments.model, engine_args, arguments.output)
        return
    sys.exit(check(arguments.model, engine_args))


if __name__ == "__main__":
    main()
