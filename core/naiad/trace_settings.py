"""Trace settings (Triton's trace extension): the server's, each model's overrides, and how a change is read.

A setting is ``trace_level`` (``["OFF"]``, or any of ``TIMESTAMPS`` and ``TENSORS``), ``trace_rate``
(every Nth request is traced), ``trace_count`` (traces left, -1 without end), ``log_frequency``
(traces per file, 0: one file at shutdown), ``trace_file`` (set at startup only) and ``trace_mode``
(``triton``). A change names some of them; a null (HTTP) or an empty value list (gRPC) sends a
model's setting back to the server's, and the server's back to its startup value. Values are read
as Triton reads them, errors worded as Triton words them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from naiad.errors import ErrorCode, NaiadError, invalid_arg

LEVELS = ("TIMESTAMPS", "TENSORS")
UINT32_MAX = 2**32 - 1
_INT32 = 2**31
_LEADING_INTEGER = re.compile(r"\s*([+-]?\d+)")
_INVALID = "Attempting to set invalid trace setting :"
ZERO_RATE = _INVALID + "sample rate must be non-zero"
NO_FILE = _INVALID + "trace file name is not given"
CHANGEABLE = {"trace_level": "level", "trace_rate": "rate", "trace_count": "count", "log_frequency": "log_frequency"}
"""The settings a client may change -> the :class:`TraceSettings` field each sets."""


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """One set of trace settings; ``level`` empty is OFF."""

    level: tuple[str, ...] = ()
    rate: int = 1000
    count: int = -1
    log_frequency: int = 0
    file: str = ""

    def to_json(self) -> dict[str, Any]:
        """The trace extension's settings object."""
        return {
            "trace_level": list(self.level) or ["OFF"],
            "trace_rate": str(self.rate),
            "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.file,
            "trace_mode": "triton",
        }


Change = dict[str, Any]
""":class:`TraceSettings` field -> its new value, or None: back to the fallback."""


FILE_NOT_CHANGEABLE = "trace file location can not be updated through network protocol"


def http_change(body: object) -> Change:
    """The change a ``trace/setting`` POST body asks for; a body that is not an object changes nothing,
    and a value of the wrong JSON type is Triton's 500."""
    if not isinstance(body, dict):
        return {}
    if "trace_file" in body:  # Triton refuses the whole request, whatever the value (null included)
        raise NaiadError(FILE_NOT_CHANGEABLE, ErrorCode.UNSUPPORTED)
    raw: dict[str, list[str] | None] = {}
    for name, value in body.items():
        if name not in CHANGEABLE:
            continue
        if value is None:
            raw[name] = None
        elif name == "trace_level":
            if not isinstance(value, list):
                raise NaiadError("attempt to access JSON non-array as array")
            if not all(isinstance(item, str) for item in value):
                raise NaiadError("attempt to access JSON non-string as string")
            raw[name] = value
        elif isinstance(value, str):
            raw[name] = [value]
        else:
            raise NaiadError("attempt to access JSON non-string as string")
    return read_change(raw, grpc=False)


def grpc_change(settings: Mapping[str, list[str]]) -> Change:
    """The change a TraceSetting request asks for: each setting's values, an empty list clearing it."""
    return read_change({name: (list(values) or None) for name, values in settings.items()}, grpc=True)


def read_change(raw: Mapping[str, list[str] | None], *, grpc: bool) -> Change:
    """Check and convert the named settings' string values (None: clear), in Triton's order."""
    if "trace_file" in raw:  # even a value that would clear it, as in Triton
        raise NaiadError(FILE_NOT_CHANGEABLE, ErrorCode.UNSUPPORTED)
    change: Change = {}
    for name, field in CHANGEABLE.items():
        if name not in raw:
            continue
        values = raw[name]
        if values is None:
            change[field] = None
        elif name == "trace_level":
            level = _level(values)
            if level is not None:
                change[field] = level
        elif grpc and len(values) > 1:
            raise invalid_arg(f"expect only 1 value for '{name}'")
        elif name == "trace_count":
            change[field] = _count(values[0], grpc=grpc)
        else:
            change[field] = _unsigned(name, values[0])
    return change


def check_settings(settings: TraceSettings) -> None:
    """Refuse the settings a change would leave, as Triton does: tracing on needs a non-zero rate and
    a trace file (tracing off takes anything)."""
    if not settings.level:
        return
    if settings.rate == 0:
        raise invalid_arg(ZERO_RATE)
    if not settings.file:
        raise invalid_arg(NO_FILE)


def _level(values: list[str]) -> tuple[str, ...] | None:
    """The levels named (empty: OFF), or None when none is known (the setting stays)."""
    if "OFF" in values:
        if len(values) > 1:
            raise invalid_arg("Expect only one trace level 'OFF' is specified")
        return ()
    known = tuple(dict.fromkeys(value for value in values if value in LEVELS))
    return known or None


def _integer(name: str, text: str, allowed: str) -> int:
    """``text``'s leading integer, as C++'s ``std::stoi`` reads it (an ``int``); ``allowed`` is the
    range Triton names when it is past an ``int``'s."""
    match = _LEADING_INTEGER.match(text)
    if match is None:
        raise invalid_arg(f"Unable to parse '{name}', got: {text}")
    value = int(match.group(1))
    if not -_INT32 <= value < _INT32:
        raise invalid_arg(f"Unable to parse '{name}', value is out of range [ {allowed} ], got: {text}")
    return value


def _unsigned(name: str, text: str) -> int:
    return _integer(name, text, f"0, {UINT32_MAX}") & UINT32_MAX  # a negative wraps, as the cast to uint32 does


def _count(text: str, *, grpc: bool) -> int:
    value = _integer("trace_count", text, f"-1, {_INT32 - 1}")
    if value < -1:
        raise invalid_arg(f"Unable to parse 'trace_count'. Expecting value >= -1, got:{' ' if grpc else ''}{text}")
    return value


def parse_trace_config(entries: list[str]) -> TraceSettings:
    """The startup settings from ``--trace-config`` values: ``triton,file=PATH`` (the mode's own
    setting), ``level=TIMESTAMPS``, ``rate=N``, ``count=N``, ``log-frequency=N``, ``mode=triton``.
    Raises ValueError, worded for the command line."""
    fields: dict[str, Any] = {}
    disabled = False  # as in Triton, an OFF level anywhere turns tracing off
    for entry in entries:
        head, comma, tail = entry.partition(",")
        mode, setting = (head, tail) if comma and "=" not in head else ("", entry)
        if mode and mode != "triton":
            raise ValueError(f"--trace-config {entry}: naiad traces in the 'triton' mode only")
        key, sep, value = setting.partition("=")
        if not sep:
            raise ValueError(f"--trace-config {entry}: expected KEY=VALUE, such as level=TIMESTAMPS")
        key = key.replace("_", "-")
        try:
            if key == "file":
                fields["file"] = value
            elif key == "mode":
                if value != "triton":
                    raise ValueError(f"--trace-config {entry}: naiad traces in the 'triton' mode only")
            elif key == "level":
                level = _startup_level(value)
                if level is None:  # Triton's words, then what it takes
                    raise ValueError(
                        f"invalid value for trace level option: {value.lower()} (--trace-config {entry}: the "
                        "level is OFF, TIMESTAMPS or TENSORS)"
                    )
                disabled = disabled or level == "OFF"
                if level != "OFF":
                    fields["level"] = tuple(dict.fromkeys((*fields.get("level", ()), level)))
            elif key == "rate":
                fields["rate"] = _unsigned("trace_rate", value)
            elif key == "count":
                fields["count"] = _count(value, grpc=False)
            elif key == "log-frequency":
                fields["log_frequency"] = _unsigned("log_frequency", value)
            else:
                raise ValueError(
                    f"--trace-config {entry}: unknown setting '{key}'; "
                    "the settings are file, level, rate, count, log-frequency and mode"
                )
        except NaiadError as error:
            raise ValueError(f"--trace-config {entry}: {error.message}") from None
    if fields.get("rate") == 0:
        raise ValueError(f"--trace-config rate=0: {ZERO_RATE}")
    if disabled:
        fields["level"] = ()
    return TraceSettings(**fields)


_STARTUP_LEVELS = {
    "off": "OFF",
    "false": "OFF",
    "timestamps": "TIMESTAMPS",
    "true": "TIMESTAMPS",
    "on": "TIMESTAMPS",
    "min": "TIMESTAMPS",
    "max": "TIMESTAMPS",
    "tensors": "TENSORS",
}
"""The level words Triton's command line takes, in any case."""


def _startup_level(value: str) -> str | None:
    """OFF, TIMESTAMPS or TENSORS for a command-line level word, as Triton reads it; None if none."""
    return _STARTUP_LEVELS.get(value.lower())
