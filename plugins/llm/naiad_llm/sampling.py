"""Sampling settings from a request: vLLM's ``SamplingParams`` names, checked and typed.

Triton's vLLM backend reads them from the ``sampling_parameters`` input (a JSON object) or, without
it, from the request parameters; clients often send numbers as strings (``"temperature": "0.1"``),
which are accepted as Triton's backend accepts them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from naiad.backend import invalid_arg
from naiad_llm.engine import SamplingSettings

LORA_NAME = "lora_name"


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise invalid_arg(f"sampling parameter '{name}' must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise invalid_arg(f"sampling parameter '{name}' must be an integer, got {value!r}")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise invalid_arg(f"sampling parameter '{name}' must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise invalid_arg(f"sampling parameter '{name}' must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise invalid_arg(f"sampling parameter '{name}' must be a finite number, got {value!r}")
    return number


def _boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise invalid_arg(f"sampling parameter '{name}' must be true or false, got {value!r}")


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(item for item in value if item)
    raise invalid_arg(f"sampling parameter '{name}' must be a string or a list of strings, got {value!r}")


def _token_ids(name: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise invalid_arg(f"sampling parameter '{name}' must be a list of token ids, got {value!r}")
    ids = tuple(_integer(name, item) for item in value)
    if any(token < 0 for token in ids):
        raise invalid_arg(f"sampling parameter '{name}' holds a negative token id: {list(ids)}")
    return ids


def _json_object(name: str, value: Any, what: str) -> dict[str, Any]:
    """``value`` as a JSON object (given as one or as its JSON text); INVALID_ARG naming the field."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise invalid_arg(f"sampling parameter '{name}' must be {what}") from None
    if not isinstance(value, dict):
        raise invalid_arg(f"sampling parameter '{name}' must be {what}, got {value!r}")
    return value


def _schema(name: str, value: Any) -> Mapping[str, Any]:
    return _json_object(name, value, "a JSON schema object")


def _structured_outputs(name: str, value: Any) -> Mapping[str, Any]:
    """vLLM's ``StructuredOutputsParams`` as Triton's vLLM backend takes it (a JSON string): its
    ``json`` (a schema) or ``json_object`` become the schema to follow."""
    value = _json_object(name, value, "a JSON object")
    kinds = sorted(key for key, given in value.items() if given not in (None, False))
    if kinds == ["json"]:
        return _schema(name, value["json"])
    if kinds == ["json_object"]:
        return {}
    raise invalid_arg(
        f"sampling parameter '{name}' must set exactly one of 'json' (a JSON schema) or 'json_object'; "
        f"naiad's engines do not enforce {', '.join(repr(kind) for kind in kinds) or 'nothing'}"
    )


_FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "max_tokens": _integer,
    "temperature": _number,
    "top_p": _number,
    "top_k": _integer,
    "min_p": _number,
    "repetition_penalty": _number,
    "presence_penalty": _number,
    "frequency_penalty": _number,
    "seed": _integer,
    "stop": _strings,
    "stop_token_ids": _token_ids,
    "ignore_eos": _boolean,
    "min_tokens": _integer,
    "n": _integer,
    "logprobs": _integer,
    "json_schema": _schema,
    "structured_outputs": _structured_outputs,
}
_SETTING = {"structured_outputs": "json_schema"}  # names whose value sets another field
SUPPORTED = (*_FIELDS, LORA_NAME)


def parse_sampling(values: Mapping[str, Any], *, strict: bool) -> tuple[SamplingSettings, str | None]:
    """The settings and the LoRA adapter name in ``values``; INVALID_ARG naming the field when wrong.

    ``strict``: an unknown name is an error (the ``sampling_parameters`` JSON); otherwise it is
    ignored (request parameters, which carry other settings too).
    """
    fields: dict[str, Any] = {}
    lora_name: str | None = None
    for name, value in values.items():
        if name == LORA_NAME:
            if value is not None and not isinstance(value, str):
                raise invalid_arg(f"sampling parameter '{LORA_NAME}' must be a string, got {value!r}")
            lora_name = value or None
            continue
        convert = _FIELDS.get(name)
        if convert is None:
            if strict:
                raise invalid_arg(
                    f"sampling parameter '{name}' is not supported; supported: {', '.join(sorted(SUPPORTED))}"
                )
            continue
        if value is None:
            continue
        fields[_SETTING.get(name, name)] = convert(name, value)
    if fields.get("top_k") == -1:
        fields["top_k"] = 0  # vLLM's "off"
    settings = SamplingSettings(**fields)
    check_sampling(settings)
    return settings, lora_name


def check_sampling(settings: SamplingSettings) -> None:
    """Range checks every engine shares (vLLM's); INVALID_ARG naming the field."""
    checks: tuple[tuple[str, bool, str], ...] = (
        ("max_tokens", settings.max_tokens is None or settings.max_tokens >= 1, "at least 1"),
        ("temperature", settings.temperature >= 0, "at least 0"),
        ("top_p", 0 < settings.top_p <= 1, "in (0, 1]"),
        ("top_k", settings.top_k >= 0, "-1 or 0 (off) or a positive integer"),
        ("min_p", 0 <= settings.min_p <= 1, "in [0, 1]"),
        ("repetition_penalty", settings.repetition_penalty > 0, "greater than 0"),
        ("presence_penalty", -2 <= settings.presence_penalty <= 2, "in [-2, 2]"),
        ("frequency_penalty", -2 <= settings.frequency_penalty <= 2, "in [-2, 2]"),
        ("min_tokens", settings.min_tokens >= 0, "at least 0"),
        (
            "min_tokens",
            settings.max_tokens is None or settings.min_tokens <= settings.max_tokens,
            f"at most max_tokens ({settings.max_tokens})",
        ),
        ("n", settings.n >= 1, "at least 1"),
        ("logprobs", settings.logprobs is None or settings.logprobs >= 0, "at least 0"),
    )
    for name, ok, expected in checks:
        if not ok:
            raise invalid_arg(f"sampling parameter '{name}' must be {expected}, got {getattr(settings, name)!r}")


def parse_sampling_json(text: str) -> tuple[SamplingSettings, str | None]:
    """:func:`parse_sampling` of the ``sampling_parameters`` input (a JSON object)."""
    try:
        values = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise invalid_arg(f"input 'sampling_parameters' is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise invalid_arg("input 'sampling_parameters' must be a JSON object")
    return parse_sampling(values, strict=True)
