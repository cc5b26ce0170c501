"""The FIL backend's ``parameters`` (Triton's names, string values) parsed and checked."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from naiad.backend import ModelConfig, invalid_arg

_log = logging.getLogger("naiad.fil")

T = TypeVar("T")

MODEL_TYPES = ("xgboost", "xgboost_json", "xgboost_ubj", "lightgbm", "treelite_checkpoint")
LAYOUTS = ("depth_first", "breadth_first", "layered")
CPU_ENGINES = ("auto", "native", "treelite")

# Parameters older FIL releases read and the current one ignores: accepted with a warning.
REMOVED = {
    "storage_type": "removed from Triton's FIL backend; ignored",
    "blocks_per_sm": "removed from Triton's FIL backend; ignored",
    "algo": "replaced by 'layout' in Triton's FIL backend; ignored",
    "threads_per_tree": "replaced by 'chunk_size' in Triton's FIL backend; ignored",
}
KNOWN = frozenset(
    {
        "model_type",
        "is_classifier",
        "output_class",
        "predict_proba",
        "threshold",
        "xgboost_allow_unknown_field",
        "cpu_nthread",
        "chunk_size",
        "layout",
        "transfer_threshold",
        "use_experimental_optimizations",
        "naiad_cpu_engine",
        *REMOVED,
    }
)

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@dataclass(frozen=True, slots=True)
class FilParameters:
    """Every parameter the FIL backend reads, with Triton's defaults.

    ``is_classifier`` is None when neither ``is_classifier`` nor the deprecated
    ``output_class`` is set; the loader then reads it from the model's objective.
    """

    model_type: str = "xgboost"
    is_classifier: bool | None = None
    predict_proba: bool = False
    threshold: float = 0.5
    xgboost_allow_unknown_field: bool = False
    cpu_nthread: int = -1
    chunk_size: int | None = None
    layout: str = "depth_first"
    transfer_threshold: int = 0
    cpu_engine: str = "auto"


def parse_parameters(config: ModelConfig) -> FilParameters:
    """Read ``config.parameters``; INVALID_ARG naming the model and parameter for a bad value."""
    reader = _Reader(config)
    for key in sorted(set(config.parameters) - KNOWN):
        _log.warning("model '%s': parameter '%s' is not a FIL backend parameter; ignored", config.name, key)
    for key, why in REMOVED.items():
        if key in config.parameters:
            _log.warning("model '%s': parameter '%s' is %s", config.name, key, why)
    if "use_experimental_optimizations" in config.parameters:
        reader.get("use_experimental_optimizations", reader.boolean, False)
        _log.info("model '%s': 'use_experimental_optimizations' has no effect in naiad", config.name)
    return FilParameters(
        model_type=reader.get("model_type", reader.choice(MODEL_TYPES), "xgboost"),
        is_classifier=_is_classifier(reader, config.name),
        predict_proba=reader.get("predict_proba", reader.boolean, False),
        threshold=reader.get("threshold", reader.number, 0.5),
        xgboost_allow_unknown_field=reader.get("xgboost_allow_unknown_field", reader.boolean, False),
        cpu_nthread=reader.get("cpu_nthread", reader.integer, -1),
        chunk_size=reader.get("chunk_size", reader.chunk_size, None),
        layout=reader.get("layout", reader.choice(LAYOUTS), "depth_first"),
        transfer_threshold=reader.get("transfer_threshold", reader.non_negative, 0),
        cpu_engine=reader.get("naiad_cpu_engine", reader.choice(CPU_ENGINES), "auto"),
    )


def _is_classifier(reader: _Reader, model_name: str) -> bool | None:
    current = reader.get("is_classifier", reader.boolean, None)
    legacy = reader.get("output_class", reader.boolean, None)
    if legacy is not None:
        _log.warning(
            "model '%s': parameter 'output_class' is deprecated (removed from Triton's FIL backend in 25.09);"
            " use 'is_classifier' instead",
            model_name,
        )
        if current is not None and current != legacy:
            raise reader.error("output_class", reader.text("output_class"), f"contradicts is_classifier '{current}'")
    return current if current is not None else legacy


class _Reader:
    """Typed access to the string parameters of one config, with uniform error messages."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config

    def text(self, key: str) -> str:
        return self.config.parameters[key].string_value.strip()

    def get(self, key: str, convert: Callable[[str, str], T], default: T) -> T:
        if key not in self.config.parameters:
            return default
        return convert(key, self.text(key))

    def error(self, key: str, value: str, expected: str) -> Exception:
        return invalid_arg(
            f"model '{self.config.name}': FIL parameter '{key}' has value '{value}', {expected};"
            " fix it in the parameters section of config.pbtxt"
        )

    def boolean(self, key: str, value: str) -> bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise self.error(key, value, 'expected "true" or "false"')

    def integer(self, key: str, value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise self.error(key, value, "expected an integer") from None

    def non_negative(self, key: str, value: str) -> int:
        number = self.integer(key, value)
        if number < 0:
            raise self.error(key, value, "expected an integer >= 0")
        return number

    def number(self, key: str, value: str) -> float:
        try:
            return float(value)
        except ValueError:
            raise self.error(key, value, "expected a number") from None

    def chunk_size(self, key: str, value: str) -> int:
        number = self.integer(key, value)
        if number not in (1, 2, 4, 8, 16, 32):
            raise self.error(key, value, "expected a power of 2 from 1 to 32")
        return number

    def choice(self, allowed: tuple[str, ...]) -> Callable[[str, str], str]:
        def convert(key: str, value: str) -> str:
            if value not in allowed:
                raise self.error(key, value, "expected one of " + ", ".join(f"'{item}'" for item in allowed))
            return value

        return convert
