"""The engine factory: picks an engine by name and imports it only when a model asks for it.

Each engine module defines ``create_engine(settings: EngineSettings) -> Engine``. Engines whose
package is not installed fail the model's load with the ``pip install`` line that adds them.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from naiad.backend import unavailable
from naiad_llm.engine import Engine


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Everything an engine needs to load one model version.

    ``model``: a local model folder (resolved against the version folder) or a hub id. ``args``: the
    engine's own arguments from ``model.json`` (for vLLM, ``AsyncEngineArgs``; ``model`` included).
    ``lora_modules``: LoRA adapter name -> folder, from ``multi_lora.json``. ``device``: "cpu" or
    "cuda:<n>", from the model's instance group. ``engine_process``: run the engine in a process of
    its own (:mod:`naiad_llm.engines.process`).
    """

    model_name: str
    model: str
    args: dict[str, Any]
    version_dir: Path
    device: str = "cpu"
    lora_modules: dict[str, str] = field(default_factory=dict)
    engine_process: bool = False


@dataclass(frozen=True, slots=True)
class _EngineEntry:
    module: str
    title: str
    package: str  # the top-level import the engine needs
    extra: str  # naiad-llm's extra that installs it
    note: str = ""


ENGINES: dict[str, _EngineEntry] = {
    "transformers": _EngineEntry(
        "naiad_llm.engines.transformers_engine", "transformers", "transformers", "transformers"
    ),
    "vllm": _EngineEntry("naiad_llm.engines.vllm_engine", "vLLM", "vllm", "vllm", "vLLM needs a CUDA GPU"),
    "tensorrt_llm": _EngineEntry(
        "naiad_llm.engines.tensorrt_llm_engine",
        "TensorRT-LLM",
        "tensorrt_llm",
        "tensorrt_llm",
        "TensorRT-LLM needs an NVIDIA GPU",
    ),
}


def create_engine(engine: str, settings: EngineSettings) -> Engine:
    """The engine named ``engine`` for ``settings``, in a process of its own if they say so; UNAVAILABLE
    naming the extra when it is missing, INVALID_ARG for arguments the engine does not take."""
    entry = ENGINES.get(engine)
    if entry is None:
        known = ", ".join(f'"{name}"' for name in ENGINES)
        raise unavailable(
            f"model '{settings.model_name}': unknown engine \"{engine}\" in model.json; use one of {known}"
        )
    try:
        importlib.import_module(entry.package)
        module = importlib.import_module(entry.module)
    except ImportError as error:
        note = f" ({entry.note})" if entry.note else ""
        raise unavailable(
            f"model '{settings.model_name}' needs the {entry.title} engine: "
            f"pip install 'naiad-llm[{entry.extra}]'{note}; importing it failed: {error}"
        ) from error
    in_process = dataclasses.replace(settings, engine_process=False)
    created: Engine = module.create_engine(in_process)  # checks the arguments, loads nothing
    if settings.engine_process:
        from naiad_llm.engines.process import EngineProcess

        return EngineProcess(engine, in_process)
    return created
