"""The transformers engine refuses what would break its generation thread, and survives that thread
dying: an empty prompt is INVALID_ARG (it stopped the thread, after which every request waited for
ever while the model reported READY), and a thread that stopped is started again for the next request."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import naiad
from naiad.backend import NaiadError
from naiad_llm.engines.transformers_engine import TransformersEngine
from naiad_llm.testing import write_model_repository

MODEL = "tiny"


def _inputs(prompt: bytes) -> dict[str, np.ndarray]:
    return {
        "text_input": np.array([prompt], dtype=np.object_),
        "sampling_parameters": np.array([b'{"max_tokens": 2, "temperature": 0, "ignore_eos": true}'], dtype=np.object_),
        "stream": np.array([False]),
    }


def test_an_empty_prompt_is_refused_and_a_stopped_generation_thread_restarts(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engines: list[TransformersEngine] = []
    start = TransformersEngine.start

    async def starting(engine: TransformersEngine) -> object:
        engines.append(engine)
        return await start(engine)

    monkeypatch.setattr(TransformersEngine, "start", starting)
    write_model_repository(tmp_path, MODEL, tiny_model, engine_process=False)
    with naiad.Server(tmp_path) as server:
        with pytest.raises(NaiadError, match="the prompt is empty"):
            list(server.stream(MODEL, _inputs(b"")))
        assert len(list(server.stream(MODEL, _inputs(b"the river runs")))) == 1  # still serving

        (engine,) = engines
        engine._manager.stop(block=True)  # as if an error had ended the generation thread
        assert not engine._manager.is_running()
        with caplog.at_level(logging.ERROR):
            answers = list(server.stream(MODEL, _inputs(b"the river runs")))
        assert len(answers) == 1
        assert bytes(answers[0]["text_output"][0])
        assert engine._manager.is_running()
        assert "the transformers generation thread stopped" in caplog.text
