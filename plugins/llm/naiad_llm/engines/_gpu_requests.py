"""What the GPU engines are sent: sampling settings as vLLM's and TensorRT-LLM's arguments, LoRA ids.

Plain dicts and tuples, so the mapping is testable where neither engine is installed; the engine
modules wrap them in the engines' own classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from naiad.backend import invalid_arg
from naiad_llm.engine import SamplingSettings


def json_constraint(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The structured-output fields for ``json_schema``: ``{}`` is any JSON object, else the schema."""
    return {"json": dict(schema)} if schema else {"json_object": True}


def vllm_sampling_kwargs(settings: SamplingSettings) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams``; ``structured_outputs`` is a dict of its fields."""
    kwargs: dict[str, Any] = {
        "max_tokens": settings.max_tokens,  # None: what the context leaves
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k or -1,  # -1 is "off" in every vLLM release
        "min_p": settings.min_p,
        "repetition_penalty": settings.repetition_penalty,
        "presence_penalty": settings.presence_penalty,
        "frequency_penalty": settings.frequency_penalty,
        "seed": settings.seed,
        "stop": list(settings.stop),
        "stop_token_ids": list(settings.stop_token_ids),
        "ignore_eos": settings.ignore_eos,
        "min_tokens": settings.min_tokens,
        "logprobs": settings.logprobs,
    }
    if settings.json_schema is not None:
        kwargs["structured_outputs"] = json_constraint(settings.json_schema)
    return kwargs


def trtllm_sampling_kwargs(settings: SamplingSettings, max_tokens: int) -> dict[str, Any]:
    """Keyword arguments of ``tensorrt_llm.SamplingParams``; ``guided_decoding`` is a dict of its fields.

    TensorRT-LLM has no "unset" ``max_tokens`` (its default is 32), so the caller resolves it. Its
    runtime samples greedily with ``top_k`` 1, which stands for temperature 0; None leaves a field at
    the runtime's default, which is "off" for ``top_k`` and ``min_p``.
    """
    greedy = settings.temperature == 0
    kwargs: dict[str, Any] = {
        "max_tokens": max_tokens,
        "temperature": None if greedy else settings.temperature,
        "top_p": None if greedy else settings.top_p,
        "top_k": 1 if greedy else (settings.top_k or None),
        "min_p": settings.min_p or None,
        "repetition_penalty": settings.repetition_penalty,
        "presence_penalty": settings.presence_penalty or None,
        "frequency_penalty": settings.frequency_penalty or None,
        "seed": settings.seed,
        "stop": list(settings.stop) or None,
        "stop_token_ids": list(settings.stop_token_ids) or None,
        "ignore_eos": settings.ignore_eos,
        "min_tokens": settings.min_tokens or None,
        "logprobs": settings.logprobs,
    }
    if settings.json_schema is not None:
        kwargs["guided_decoding"] = json_constraint(settings.json_schema)
    return kwargs


def lora_ids(lora_modules: Mapping[str, str]) -> dict[str, tuple[int, str]]:
    """Adapter name -> (integer id, folder): ids count from 1 in ``multi_lora.json`` order, as Triton's."""
    return {name: (index, path) for index, (name, path) in enumerate(lora_modules.items(), start=1)}


def lora_for(model_name: str, loras: Mapping[str, tuple[int, str]], name: str | None) -> tuple[str, int, str] | None:
    """The adapter a request names, as (name, id, folder); None for the base model; INVALID_ARG if unknown."""
    if name is None:
        return None
    if name not in loras:
        if not loras:
            raise invalid_arg(f"model '{model_name}' serves no LoRA adapters (no multi_lora.json); got '{name}'")
        known = ", ".join(sorted(loras))
        raise invalid_arg(f"model '{model_name}' has no LoRA adapter '{name}'; it serves: {known}")
    lora_id, path = loras[name]
    return name, lora_id, path


def lora_request(
    model_name: str, loras: Mapping[str, tuple[int, str]], name: str | None, request_class: Callable[[], Any]
) -> Any:
    """The engine's ``LoRARequest`` (``request_class()`` imports it) for the adapter a request names;
    None for the base model; INVALID_ARG if unknown."""
    adapter = lora_for(model_name, loras, name)
    if adapter is None:
        return None
    lora_name, lora_id, path = adapter
    return request_class()(lora_name=lora_name, lora_int_id=lora_id, lora_path=path)


def one_sequence(model_name: str, settings: SamplingSettings) -> None:
    """INVALID_ARG unless the request asks for one sequence: a stream carries one."""
    if settings.n != 1:
        raise invalid_arg(f"model '{model_name}' streams one sequence per request; send n={settings.n} requests")
