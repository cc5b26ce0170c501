"""deploy/grafana/naiad.json: valid, and every metric it queries is one naiad exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from naiad.testing import ServerProcess

from .conftest import metrics_text

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "naiad.json"

# Families that exist only with a GPU or an opt-in --metrics-config setting.
OPTIONAL = {
    "nv_gpu_utilization",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_inference_request_summary_us",
    "nv_inference_first_response_histogram_ms",
}


def _expressions(panels: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for panel in panels:
        found += [target["expr"] for target in panel.get("targets", [])]
        found += _expressions(panel.get("panels", []))
    return found


def test_dashboard_queries_only_metrics_naiad_exposes(server: ServerProcess) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "naiad-overview"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    expressions = _expressions(dashboard["panels"])
    assert len(expressions) >= 20
    exposed = {family.name for family in text_string_to_metric_families(metrics_text(server))} | OPTIONAL
    for expression in expressions:
        for name in re.findall(r"\b(?:nv|naiad)_[a-z_]+", expression):
            family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in exposed else name
            assert family in exposed, f"{name} in {expression!r} is not a naiad metric"
