"""A model version's engine settings, from Triton's vLLM layout: ``1/model.json``, ``1/multi_lora.json``.

Backend ``vllm``: ``model.json`` is vLLM's ``AsyncEngineArgs`` as JSON, exactly as Triton's vLLM
backend reads it. Backend ``llm``: the same file also names ``"engine"`` (``transformers``,
``vllm`` or ``tensorrt_llm``; default ``transformers``) next to ``"model"`` and that engine's own
arguments. ``"model"`` is a folder (relative to the version folder, or absolute) or a hub id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from naiad.backend import NaiadError, invalid_arg
from naiad_llm.engines import ENGINES, EngineSettings

ENGINE_ARGS_FILE = "model.json"
LORA_FILE = "multi_lora.json"
DEFAULT_ENGINE = "transformers"
# Engines that run in a process of their own unless model.json says "engine_process": false. vLLM runs
# its engine core in a process of its own already; the GPU engines are not measured in one.
OWN_PROCESS_BY_DEFAULT = frozenset({"transformers"})


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which engine serves a model version, and with what."""

    engine: str
    settings: EngineSettings


def read_model_spec(backend: str, model_name: str, version_dir: Path, device: str) -> ModelSpec:
    """The spec in ``version_dir``; INVALID_ARG naming the file and what is wrong."""
    path = version_dir / ENGINE_ARGS_FILE
    args = _read_json_object(path, model_name, what="engine arguments")
    engine = str(args.pop("engine", "vllm" if backend == "vllm" else DEFAULT_ENGINE))
    if backend == "vllm" and engine != "vllm":
        raise invalid_arg(
            f'model \'{model_name}\': {path} names engine "{engine}", but backend "vllm" runs vLLM only; '
            'use backend "llm" to choose the engine'
        )
    if engine not in ENGINES:
        raise invalid_arg(f"model '{model_name}': {path}: unknown engine \"{engine}\"; use one of {', '.join(ENGINES)}")
    model = args.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_arg(f"model '{model_name}': {path} must name the model: \"model\": a model folder or hub id")
    resolved = _resolve(model, version_dir)
    args["model"] = resolved
    lora: dict[str, str] = {}
    if str(args.get("enable_lora", "")).lower() == "true":
        adapters = _read_json_object(version_dir / LORA_FILE, model_name, what="LoRA adapters (enable_lora is true)")
        lora = {str(name): _resolve(str(folder), version_dir) for name, folder in adapters.items()}
    process = args.pop("engine_process", engine in OWN_PROCESS_BY_DEFAULT)
    if not isinstance(process, bool):
        raise invalid_arg(f"model '{model_name}': {path}: \"engine_process\" must be true or false, not {process!r}")
    settings = EngineSettings(model_name, resolved, args, version_dir, device, lora, process)
    return ModelSpec(engine, settings)


def _read_json_object(path: Path, model_name: str, *, what: str) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise invalid_arg(f"model '{model_name}': {path} with its {what} is missing") from None
    except (OSError, ValueError) as error:
        raise NaiadError(f"model '{model_name}': cannot read {path}: {error}") from None
    if not isinstance(document, dict):
        raise invalid_arg(f"model '{model_name}': {path} must hold a JSON object")
    return document


def _resolve(model: str, version_dir: Path) -> str:
    """A folder relative to the version folder becomes absolute; anything else stays (a hub id)."""
    local = version_dir / model
    return str(local.resolve()) if not Path(model).is_absolute() and local.exists() else model
