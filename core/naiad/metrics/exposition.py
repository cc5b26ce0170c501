"""The Prometheus text format (0.0.4), written the way Triton's prometheus-cpp writes it.

prometheus_client's own writer cannot be used as is: it names counter families ``<name>_total``
(Triton's counters have no suffix, and dashboards query the bare names) and prints large values in
exponent notation (``8.5e+10``), which perf_analyzer's GPU-metric regex cannot read. This writer
takes the families of a :class:`prometheus_client.CollectorRegistry` and prints names exactly as
given, labels sorted by name (``le`` / ``quantile`` last), integral values as integers and other
values in plain decimal notation.
"""

from __future__ import annotations

import math
from decimal import Decimal

from prometheus_client import CollectorRegistry

CONTENT_TYPE = "text/plain; charset=utf-8"

_LAST_LABELS = ("le", "quantile")


def format_value(value: float) -> str:
    """``12``, ``0.25``, ``NaN``, ``+Inf``: never exponent notation."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**63:
        return str(int(value))
    return format(Decimal(repr(float(value))), "f")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    names = sorted(name for name in labels if name not in _LAST_LABELS)
    names += [name for name in _LAST_LABELS if name in labels]
    return "{" + ",".join(f'{name}="{_escape_label(str(labels[name]))}"' for name in names) + "}"


def render(registry: CollectorRegistry) -> str:
    """Every family of ``registry`` in the text format; families without samples are left out."""
    lines: list[str] = []
    for family in registry.collect():
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {_escape_help(family.documentation)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            lines.append(f"{sample.name}{format_labels(sample.labels)} {format_value(sample.value)}")
    return "\n".join(lines) + "\n" if lines else ""
