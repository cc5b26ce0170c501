"""Triton's openvino backend parameters (``config.pbtxt`` ``parameters``), parsed and checked.

Values are case-insensitive strings as in Triton. Boolean switches are on only for ``YES``.
OpenVINO properties are passed to ``compile_model`` (per instance); those the target
device does not support are dropped there with a warning (:mod:`naiad_openvino.instance`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from naiad.backend import ModelConfig, invalid_arg

logger = logging.getLogger("naiad.openvino")

PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")

# Parameters of older Triton releases (InferenceEngine API) and what replaced them.
_LEGACY = {
    "CPU_THREADS_NUM": "INFERENCE_NUM_THREADS",
    "CPU_THROUGHPUT_STREAMS": "NUM_STREAMS",
    "ENFORCE_BF16": "HINT_BF16",
    "CPU_BIND_THREAD": None,
    "SKIP_DYNAMIC_BATCHSIZE": "SKIP_OV_DYNAMIC_BATCHSIZE",
}


@dataclass(frozen=True, slots=True)
class OpenVinoOptions:
    """What a model's parameters ask of OpenVINO and of the backend."""

    compile_properties: dict[str, str] = field(default_factory=dict)
    cpu_extension_path: str | None = None
    target_device: str | None = None
    skip_dynamic_batch: bool = False
    batch_padding: bool = False
    reshape_io_layers: bool = False


def parse_parameters(config: ModelConfig) -> OpenVinoOptions:
    """Read the openvino parameters of ``config``; INVALID_ARG names the bad one."""
    values = {key: parameter.string_value for key, parameter in config.parameters.items()}
    reader = _Reader(config.name, values)
    compile_properties: dict[str, str] = {}
    hint = reader.get("PERFORMANCE_HINT")
    if hint is not None:
        compile_properties["PERFORMANCE_HINT"] = reader.choice("PERFORMANCE_HINT", hint, PERFORMANCE_HINTS)
    streams = reader.get("NUM_STREAMS")
    if streams is not None:
        compile_properties["NUM_STREAMS"] = reader.streams(streams)
    threads = reader.get("INFERENCE_NUM_THREADS")
    if threads is not None:
        compile_properties["INFERENCE_NUM_THREADS"] = reader.count("INFERENCE_NUM_THREADS", threads)
    bf16 = reader.get("HINT_BF16")
    if bf16 is not None:
        reader.choice("HINT_BF16", bf16, ("YES",))
        compile_properties["INFERENCE_PRECISION_HINT"] = "bf16"
    compilation = reader.get("COMPILATION_NUM_THREADS")
    if compilation is not None:
        compile_properties["COMPILATION_NUM_THREADS"] = reader.count("COMPILATION_NUM_THREADS", compilation)
    for legacy, replacement in _LEGACY.items():
        if legacy in values:
            instead = f"; use {replacement}" if replacement else ""
            logger.warning(
                "model '%s': parameter %s is no longer supported and is ignored%s", config.name, legacy, instead
            )
    target = reader.get("TARGET_DEVICE")
    return OpenVinoOptions(
        compile_properties=compile_properties,
        cpu_extension_path=reader.get("CPU_EXTENSION_PATH", lower=False),
        target_device=target.upper() if target else None,
        skip_dynamic_batch=reader.flag("SKIP_OV_DYNAMIC_BATCHSIZE"),
        batch_padding=reader.flag("ENABLE_BATCH_PADDING"),
        reshape_io_layers=reader.flag("RESHAPE_IO_LAYERS"),
    )


class _Reader:
    def __init__(self, model_name: str, values: dict[str, str]) -> None:
        self.model_name = model_name
        self.values = values

    def get(self, key: str, *, lower: bool = True) -> str | None:
        """The stripped value, or None when absent or empty (Triton ignores empty values)."""
        value = self.values.get(key, "").strip()
        if not value:
            return None
        return value.lower() if lower else value

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if value is not None and value not in ("yes", "no"):
            logger.warning(
                "model '%s': parameter %s is '%s'; only YES turns it on, so it is off",
                self.model_name,
                key,
                self.values[key],
            )
        return value == "yes"

    def choice(self, key: str, value: str, allowed: tuple[str, ...]) -> str:
        if value.upper() not in allowed:
            raise self._error(key, "/".join(allowed), value)
        return value.upper()

    def count(self, key: str, value: str) -> str:
        if not value.isdigit():
            raise self._error(key, "a non-negative number", value)
        return value

    def streams(self, value: str) -> str:
        if value in ("auto", "numa"):
            return value.upper()
        if value.isdigit():
            return value
        raise self._error("NUM_STREAMS", "either AUTO/NUMA/<int_value>", value)

    def _error(self, key: str, expected: str, value: str) -> Exception:
        return invalid_arg(
            f"model '{self.model_name}': expected the parameter '{key}' to be {expected}, got {value}; "
            f'fix parameters {{ key: "{key}" ... }} in config.pbtxt'
        )
