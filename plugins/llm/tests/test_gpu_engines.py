"""The vLLM and TensorRT-LLM engines: their pure mapping logic here, the engines themselves (and the
transformers engine) on a CUDA GPU.

The GPU tests load ``$NAIAD_LLM_GPU_MODEL`` (a folder or hub id; default: the tiny model of
:mod:`naiad_llm.testing`, built on the spot) and skip only where no CUDA device is visible.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad_llm.engine import Engine, GenerationOutput, GenerationRequest, SamplingSettings
from naiad_llm.engines import EngineSettings, create_engine
from naiad_llm.engines._gpu_device import VISIBLE, only_device, visible_devices, world_size
from naiad_llm.engines._gpu_outputs import TextStream, finish_reason, logprob_dicts
from naiad_llm.engines._gpu_requests import (
    json_constraint,
    lora_for,
    lora_ids,
    lora_request,
    one_sequence,
    trtllm_sampling_kwargs,
    vllm_sampling_kwargs,
)
from naiad_llm.engines._gpu_stats import VllmLoad, trtllm_engine_stats
from naiad_llm.engines.vllm_engine import spawn_workers


def settings(tmp_path: Path, **changes: Any) -> EngineSettings:
    fields: dict[str, Any] = {"model_name": "m", "model": "some/model", "args": {}, "version_dir": tmp_path}
    return EngineSettings(**{**fields, **changes})


# --- sampling settings -> engine arguments ---------------------------------------------------------


def test_vllm_kwargs_map_every_setting() -> None:
    sampling = SamplingSettings(
        max_tokens=7,
        temperature=0.5,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        repetition_penalty=1.1,
        presence_penalty=0.5,
        frequency_penalty=-0.25,
        seed=3,
        stop=("\n\n",),
        stop_token_ids=(2,),
        ignore_eos=True,
        min_tokens=2,
        logprobs=2,
    )
    assert vllm_sampling_kwargs(sampling) == {
        "max_tokens": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.25,
        "seed": 3,
        "stop": ["\n\n"],
        "stop_token_ids": [2],
        "ignore_eos": True,
        "min_tokens": 2,
        "logprobs": 2,
    }


def test_vllm_kwargs_defaults_leave_the_length_to_the_context_and_top_k_off() -> None:
    kwargs = vllm_sampling_kwargs(SamplingSettings())
    assert kwargs["max_tokens"] is None
    assert kwargs["top_k"] == -1
    assert "structured_outputs" not in kwargs


def test_json_schema_becomes_a_structured_output_constraint() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert vllm_sampling_kwargs(SamplingSettings(json_schema=schema))["structured_outputs"] == {"json": schema}
    assert vllm_sampling_kwargs(SamplingSettings(json_schema={}))["structured_outputs"] == {"json_object": True}
    assert trtllm_sampling_kwargs(SamplingSettings(json_schema={}), 4)["guided_decoding"] == {"json_object": True}
    assert json_constraint(schema) == {"json": schema}


def test_vllm_workers_are_spawned_unless_the_operator_chose_a_method() -> None:
    environ: dict[str, str] = {}
    spawn_workers(environ)
    assert environ == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    chosen = {"VLLM_WORKER_MULTIPROC_METHOD": "fork"}
    spawn_workers(chosen)
    assert chosen == {"VLLM_WORKER_MULTIPROC_METHOD": "fork"}


def test_trtllm_kwargs_leave_off_settings_at_the_runtime_default() -> None:
    assert trtllm_sampling_kwargs(SamplingSettings(), 16) == {
        "max_tokens": 16,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
        "min_p": None,
        "repetition_penalty": 1.0,
        "presence_penalty": None,
        "frequency_penalty": None,
        "seed": None,
        "stop": None,
        "stop_token_ids": None,
        "ignore_eos": False,
        "min_tokens": None,
        "logprobs": None,
    }


def test_trtllm_kwargs_sample_greedily_with_top_k_1_at_temperature_0() -> None:
    kwargs = trtllm_sampling_kwargs(SamplingSettings(temperature=0, top_p=0.5, top_k=5, stop=("x",)), 8)
    assert (kwargs["temperature"], kwargs["top_p"], kwargs["top_k"]) == (None, None, 1)
    assert kwargs["stop"] == ["x"]


def test_one_sequence_per_request() -> None:
    one_sequence("m", SamplingSettings(n=1))
    with pytest.raises(NaiadError) as raised:
        one_sequence("m", SamplingSettings(n=2))
    assert raised.value.code is ErrorCode.INVALID_ARG


# --- LoRA adapters ---------------------------------------------------------------------------------


def test_lora_ids_count_from_1_in_multi_lora_json_order() -> None:
    document = json.loads('{"alpaca": "/w/alpaca", "bactrian": "/w/bactrian"}')
    assert lora_ids(document) == {"alpaca": (1, "/w/alpaca"), "bactrian": (2, "/w/bactrian")}


def test_lora_for_resolves_names_and_refuses_unknown_ones() -> None:
    loras = lora_ids({"alpaca": "/w/alpaca"})
    assert lora_for("m", loras, None) is None
    assert lora_for("m", loras, "alpaca") == ("alpaca", 1, "/w/alpaca")
    with pytest.raises(NaiadError, match="no LoRA adapter 'other'; it serves: alpaca") as raised:
        lora_for("m", loras, "other")
    assert raised.value.code is ErrorCode.INVALID_ARG
    with pytest.raises(NaiadError, match="serves no LoRA adapters"):
        lora_for("m", {}, "alpaca")


def test_lora_request_builds_the_engines_request_with_its_keywords() -> None:
    loras = lora_ids({"alpaca": "/w/alpaca"})
    assert lora_request("m", loras, None, lambda: dict) is None
    built = lora_request("m", loras, "alpaca", lambda: dict)  # vLLM and TensorRT-LLM take the same keywords
    assert built == {"lora_name": "alpaca", "lora_int_id": 1, "lora_path": "/w/alpaca"}


# --- outputs ---------------------------------------------------------------------------------------


def test_finish_reasons_of_both_engines() -> None:
    assert [finish_reason(reason) for reason in ("stop", "length", "abort", "cancelled", "timeout")] == [
        "stop",
        "length",
        "abort",
        "abort",
        "abort",
    ]
    with pytest.raises(RuntimeError, match="'error'"):
        finish_reason("error")


def stream(texts: list[str], stops: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """Feed cumulative texts (the last one final) and collect the deltas."""
    text = TextStream(stops)
    deltas = [text.update(value, index == len(texts) - 1) for index, value in enumerate(texts)]
    return deltas, text.stopped


def test_cumulative_text_becomes_deltas() -> None:
    assert stream(["He", "Hello", "Hello, w", "Hello, world"]) == (["He", "llo", ", w", "orld"], False)


def test_text_that_may_begin_a_stop_string_is_held_back_until_it_is_not_one() -> None:
    deltas, stopped = stream(["a <", "a <e", "a <ex", "a <ex!"], stops=("<end>",))
    assert deltas == ["a ", "", "<ex", "!"]
    assert not stopped


def test_a_stop_string_spread_over_tokens_ends_the_text() -> None:
    text = TextStream(("<end>",))
    assert text.update("one <e", False) == "one "
    assert text.update("one <end> two", False) == ""
    assert text.stopped
    assert text.update("one <end> two three", True) == ""


def test_text_the_engine_trims_at_the_end_is_never_sent() -> None:
    # TensorRT-LLM streamed "<" (the start of the stop string "<e>"), then trimmed it from its final text.
    assert stream(["x <", "x"], stops=("<e>",)) == (["x ", ""], False)
    assert stream(["x ab", "x a"], stops=("abc",)) == (["x ", "a"], False)


def test_logprobs_from_both_engines_shapes() -> None:
    entry = {5: SimpleNamespace(logprob=-0.5, rank=1), 9: SimpleNamespace(logprob=-1.5, rank=2)}
    assert logprob_dicts([entry], [5]) == [{5: -0.5, 9: -1.5}]
    assert logprob_dicts([-0.25, -0.75], [3, 4]) == [{3: -0.25}, {4: -0.75}]
    assert logprob_dicts(None, [3]) is None


# --- engine load -----------------------------------------------------------------------------------


def scheduler(running: int, waiting: int, kv: float) -> SimpleNamespace:
    return SimpleNamespace(num_running_reqs=running, num_waiting_reqs=waiting, kv_cache_usage=kv)


def test_vllm_load_sums_engine_cores_and_averages_their_kv_cache() -> None:
    load = VllmLoad()
    assert load.stats().running == 0
    first, second = load.factory(None, 0), load.factory(None, 1)
    first.record(scheduler(3, 1, 0.5), None)
    second.record(scheduler(2, 0, 0.25), None, mm_cache_stats=None, engine_idx=1)  # later vLLM releases
    first.record(None, SimpleNamespace())  # an iteration without scheduler stats keeps the last ones
    stats = load.stats()
    assert (stats.running, stats.waiting, stats.kv_cache_usage) == (5, 1, 0.375)
    first.log()
    first.log_engine_initialized()
    first.record_sleep_state(1, 1)


def test_trtllm_iteration_stats_give_the_load() -> None:
    record = {
        "numActiveRequests": 4,
        "numQueuedRequests": 2,
        "inflightBatchingStats": {"numPausedRequests": 1},
        "kvCacheStats": {"maxNumBlocks": 100, "usedNumBlocks": 25},
    }
    stats = trtllm_engine_stats(record)
    assert (stats.running, stats.waiting, stats.kv_cache_usage) == (4, 3, 0.25)
    assert trtllm_engine_stats(json.dumps(record)) == stats
    assert trtllm_engine_stats({"kvCacheStats": {"maxNumBlocks": 10, "freeNumBlocks": 4}}).kv_cache_usage == 0.6
    assert trtllm_engine_stats({}).kv_cache_usage == 0.0


# --- devices ---------------------------------------------------------------------------------------


def test_visible_devices_narrow_single_gpu_models_to_their_device() -> None:
    assert visible_devices("cuda:1", 1, None) == "1"
    assert visible_devices("cuda:1", 1, "4, 5") == "5"
    assert visible_devices("cuda:3", 1, "4,5") is None
    assert visible_devices("cuda:0", 2, None) is None  # multi-GPU models see every device
    assert visible_devices("cpu", 1, None) is None
    assert world_size({"tensor_parallel_size": 2, "pipeline_parallel_size": "2"}) == 4
    assert world_size({}) == 1


def test_only_device_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VISIBLE, raising=False)
    with only_device("cuda:2", 1):
        assert os.environ[VISIBLE] == "2"
    assert VISIBLE not in os.environ
    monkeypatch.setenv(VISIBLE, "6,7")
    with only_device("cuda:1", 1):
        assert os.environ[VISIBLE] == "7"
    assert os.environ[VISIBLE] == "6,7"


# --- the factory, without the engines' packages ----------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "package", "extra", "device"),
    [("vllm", "vllm", "vllm", "CUDA GPU"), ("tensorrt_llm", "tensorrt_llm", "tensorrt_llm", "NVIDIA GPU")],
)
def test_a_missing_engine_names_its_extra_and_the_gpu_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, package: str, extra: str, device: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    with pytest.raises(NaiadError) as raised:
        create_engine(engine, settings(tmp_path))
    assert raised.value.code is ErrorCode.UNAVAILABLE
    assert f"pip install 'naiad-llm[{extra}]'" in raised.value.message
    assert device in raised.value.message


def test_engine_modules_import_without_their_packages(tmp_path: Path) -> None:
    from naiad_llm.engines import tensorrt_llm_engine, vllm_engine

    assert isinstance(vllm_engine.create_engine(settings(tmp_path)), Engine)
    assert isinstance(tensorrt_llm_engine.create_engine(settings(tmp_path)), Engine)


# --- the engines themselves, on a CUDA GPU ---------------------------------------------------------


def cuda_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


gpu = pytest.mark.skipif(not cuda_visible(), reason="needs a CUDA device: torch.cuda.is_available() is false")


@pytest.fixture(scope="module")
def gpu_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    named = os.environ.get("NAIAD_LLM_GPU_MODEL")
    if named:
        return named
    from naiad_llm.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


ENGINE_ARGS = {
    "transformers": {"max_model_len": 512},
    "vllm": {"gpu_memory_utilization": 0.3, "enforce_eager": True, "max_model_len": 512},
    "tensorrt_llm": {"max_seq_len": 512, "max_batch_size": 8, "enable_iter_perf_stats": True},
}


@pytest.fixture(scope="module", params=["transformers", "vllm", "tensorrt_llm"])
def started(
    request: pytest.FixtureRequest, gpu_model: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, asyncio.Runner]]:
    name = request.param
    folder = tmp_path_factory.mktemp(name)
    engine = create_engine(name, settings(folder, model=gpu_model, args=ENGINE_ARGS[name], device="cuda:0"))
    with asyncio.Runner() as runner:
        info = runner.run(engine.start())
        assert info.max_model_len == 512
        assert info.tokenizer is not None
        try:
            yield engine, runner
        finally:
            runner.run(engine.stop())


async def collect(outputs: AsyncIterator[GenerationOutput]) -> list[GenerationOutput]:
    return [output async for output in outputs]


@gpu
def test_a_greedy_request_streams_deltas_to_its_length(started: tuple[Engine, asyncio.Runner]) -> None:
    engine, runner = started
    sampling = SamplingSettings(max_tokens=8, temperature=0, ignore_eos=True)
    outputs = runner.run(collect(engine.generate(GenerationRequest("r1", "The quick brown fox", sampling))))
    assert outputs[-1].finished
    assert outputs[-1].finish_reason == "length"
    assert outputs[-1].num_output_tokens == 8
    assert sum(len(output.token_ids) for output in outputs) == 8
    assert outputs[-1].num_input_tokens > 0
    again = runner.run(collect(engine.generate(GenerationRequest("r2", "The quick brown fox", sampling))))
    assert "".join(output.text for output in again) == "".join(output.text for output in outputs)


@gpu
def test_abort_ends_a_running_request(started: tuple[Engine, asyncio.Runner]) -> None:
    engine, runner = started

    async def abort_after_first() -> list[GenerationOutput]:
        sampling = SamplingSettings(max_tokens=400, ignore_eos=True)
        outputs: list[GenerationOutput] = []
        async for output in engine.generate(GenerationRequest("long", "Rivers run", sampling)):
            if not outputs:
                stats = engine.stats()
                assert stats.running + stats.waiting >= 1
                await engine.abort("long")
            outputs.append(output)
        return outputs

    outputs = runner.run(asyncio.wait_for(abort_after_first(), 60))
    assert outputs[-1].finish_reason == "abort"
    assert outputs[-1].num_output_tokens < 400
