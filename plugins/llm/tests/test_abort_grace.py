"""A cancelled request whose engine keeps its outputs open after the abort (sends nothing more and
never ends them) is no longer waited for: the scheduler closes them after the grace period, which
ends the request in the engine, answers it and reports its end. The real transformers engine runs
in the test's process; its stream stalls after the first output and its abort is ignored, as an
engine that misses an abort would behave."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

import naiad
from naiad_llm import scheduler
from naiad_llm.engine import GenerationOutput, GenerationRequest
from naiad_llm.engines.transformers_engine import TransformersEngine
from naiad_llm.testing import write_model_repository

MODEL = "tiny"
GRACE_S = 0.3


class _StreamsLeftOpen:
    """Replaces the engine's generate and abort: after its first output a request's stream sends nothing
    and stays open until it is closed (closing it ends the request in the engine, as before); aborts
    are only recorded."""

    def __init__(self) -> None:
        self.aborted: set[str] = set()
        self.engines: list[TransformersEngine] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        generate = TransformersEngine.generate

        async def generating(engine: TransformersEngine, request: GenerationRequest) -> AsyncIterator[GenerationOutput]:
            self.engines.append(engine)
            async with contextlib.aclosing(generate(engine, request)) as outputs:  # type: ignore[type-var]
                first = await anext(outputs)
                yield first
                if not first.finished:
                    await asyncio.Event().wait()  # open, silent, until closed

        async def abort(engine: TransformersEngine, request_id: str) -> None:
            self.aborted.add(request_id)

        monkeypatch.setattr(TransformersEngine, "generate", generating)
        monkeypatch.setattr(TransformersEngine, "abort", abort)


def _inputs(max_tokens: int) -> dict[str, np.ndarray]:
    sampling = f'{{"max_tokens": {max_tokens}, "temperature": 0, "ignore_eos": true}}'
    return {
        "text_input": np.array([b"the river runs"], dtype=np.object_),
        "sampling_parameters": np.array([sampling.encode()], dtype=np.object_),
        "stream": np.array([True]),
    }


def _requests_counted(server: naiad.Server) -> int:
    statistics = server.model_statistics(MODEL)["model_stats"][0]["inference_stats"]
    return int(statistics["success"]["count"]) + int(statistics["fail"]["count"])


def test_an_aborted_request_the_engine_keeps_open_is_closed_after_the_grace(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    faulty = _StreamsLeftOpen()
    faulty.install(monkeypatch)
    monkeypatch.setattr(scheduler, "ABORT_GRACE_S", GRACE_S)
    write_model_repository(tmp_path, MODEL, tiny_model, engine_process=False)
    with naiad.Server(tmp_path) as server:
        stream = server.stream(MODEL, _inputs(max_tokens=400))
        ended = threading.Event()
        texts: list[bytes] = []
        failures: list[BaseException] = []

        def read() -> None:
            try:
                for response in stream:
                    texts.append(bytes(response["text_output"][0]))
                    if len(texts) == 1:
                        stream.cancel()
            except BaseException as error:
                failures.append(error)
            ended.set()

        with caplog.at_level(logging.WARNING, logger=scheduler.__name__):
            reader = threading.Thread(target=read, daemon=True)
            started = time.monotonic()
            reader.start()
            assert ended.wait(timeout=30), "the cancelled request was still waited for"
            waited = time.monotonic() - started
        assert not failures, failures
        assert faulty.aborted, "the scheduler aborted the request in the engine"
        assert waited >= GRACE_S, "the request ended before the grace: the engine's stream did not hang"
        assert len(texts) == 1
        assert any(
            f"model '{MODEL}'" in record.getMessage() and "did not end request" in record.getMessage()
            for record in caplog.records
        )
        engine = faulty.engines[0]
        deadline = time.monotonic() + 10
        while engine.stats().running:  # closing the outputs ended the request in the engine
            assert time.monotonic() < deadline, "the request still holds its slot in the engine"
            time.sleep(0.05)
        while _requests_counted(server) != 1:  # counted once its execution ended too, after the final response
            assert time.monotonic() < deadline, "the request's end was never reported"
            time.sleep(0.05)
        again = list(server.stream(MODEL, _inputs(max_tokens=1)))  # the model still serves
        assert len(again) == 1
        assert bytes(again[0]["text_output"][0])
