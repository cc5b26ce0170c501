"""The metrics pieces in-process: text format, --metrics-config, CPU/RAM from /proc, GPUs through NVML."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from naiad.lifecycle import ServingVersions
from naiad.metrics.config import MetricsOptions, apply_metrics_config
from naiad.metrics.exposition import format_labels, format_value, render
from naiad.metrics.models import ModelCollector
from naiad.metrics.nvml import Nvml
from naiad.metrics.system import SystemMetrics, read_cpu_times, read_memory
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.statistics import ModelStatistics


def test_values_are_never_in_exponent_notation() -> None:
    assert format_value(12.0) == "12"
    assert format_value(85_000_000_000.0) == "85000000000"
    assert format_value(0.25) == "0.25"
    assert format_value(1e-7) == "0.0000001"
    assert format_value(float("nan")) == "NaN"
    assert format_value(float("inf")) == "+Inf"


def test_labels_sorted_with_le_and_quantile_last_and_escaped() -> None:
    assert format_labels({"version": "1", "model": "m", "reason": "OTHER"}) == '{model="m",reason="OTHER",version="1"}'
    assert format_labels({"le": "5", "version": "1", "model": "m"}) == '{model="m",version="1",le="5"}'
    assert format_labels({"model": 'a"b\\c\nd'}) == '{model="a\\"b\\\\c\\nd"}'


def test_counters_keep_their_names() -> None:
    class Collector:
        def collect(self) -> list[Metric]:
            family = Metric("nv_inference_count", "Number of inferences", "counter")
            family.add_sample("nv_inference_count", {"model": "m", "version": "1"}, 8)
            return [family, Metric("empty", "no samples", "gauge")]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    assert render(registry) == (
        "# HELP nv_inference_count Number of inferences\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="m",version="1"} 8\n'
    )


def test_metrics_config_uses_tritons_keys() -> None:
    options = apply_metrics_config(
        MetricsOptions(),
        [
            "histogram_latencies=true",
            "summary_latencies=1",
            "summary_quantiles=0.5:0.05,0.9:0.01",
            "counter_latencies=false",
            "response_latencies=false",
        ],
    )
    assert options.statistics.histogram_latencies
    assert options.statistics.summary_latencies
    assert options.statistics.summary_quantiles == ((0.5, 0.05), (0.9, 0.01))
    assert not options.counter_latencies
    assert not options.statistics.response_latencies
    for bad, message in (
        ("nonsense=true", "unknown --metrics-config key 'nonsense'"),
        ("histogram_latencies", "expects <key>=<value>"),
        ("summary_latencies=maybe", "expects true or false"),
        ("summary_quantiles=2:0.1", "summary_quantiles expects"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            apply_metrics_config(MetricsOptions(), [bad])


def test_cpu_utilization_and_memory_from_proc(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n")
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
    times = read_cpu_times(tmp_path)
    assert times is not None
    assert (times.busy, times.total) == (200, 1000)
    assert read_memory(tmp_path) == (1_024_000, 614_400)
    system = SystemMetrics(cpu=True, gpu=False, proc=tmp_path)
    (tmp_path / "stat").write_text("cpu  175 0 175 750 100 0 0 0 0 0\n")  # +150 busy of +200
    system.poll()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(system)
    text = render(registry)
    assert "nv_cpu_utilization 0.75\n" in text
    assert "nv_cpu_memory_total_bytes 1024000\n" in text
    assert "nv_cpu_memory_used_bytes 614400\n" in text
    assert "nv_gpu" not in text


FAKE_NVML = r"""
#include <stdio.h>
typedef struct { unsigned int gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
static unsigned long long energy = 5000000;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetUUID(void *h, char *buf, unsigned int len) {
    snprintf(buf, len, "GPU-fake-%ld", (long)h - 1); return 0; }
int nvmlDeviceGetUtilizationRates(void *h, util_t *u) { u->gpu = 42; u->memory = 7; return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) {
    m->total = 85899345920ULL; m->used = 1073741824ULL; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetPowerUsage(void *h, unsigned int *p) {
    if ((long)h == 2) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *p = 123456; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *p) { *p = 700000; return 0; }
int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *e) { energy += 2500; *e = energy; return 0; }
"""


@pytest.fixture
def fake_nvml(tmp_path: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler is not None, "a C compiler (gcc) is needed to build the fake libnvidia-ml"
    source = tmp_path / "nvml.c"
    source.write_text(FAKE_NVML)
    library = tmp_path / "libnvidia-ml.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_gpu_metrics_through_nvml(fake_nvml: Path) -> None:
    nvml = Nvml.open(str(fake_nvml))
    assert nvml is not None
    assert [(d.ordinal, d.uuid) for d in nvml.devices(visible=None)] == [(0, "GPU-fake-0"), (1, "GPU-fake-1")]
    assert [d.uuid for d in nvml.devices(visible="1")] == ["GPU-fake-1"]
    assert [d.uuid for d in nvml.devices(visible="GPU-fake-1,0")] == ["GPU-fake-1", "GPU-fake-0"]
    assert nvml.devices(visible="") == []
    assert nvml.devices(visible="-1") == []
    sample = nvml.sample(nvml.devices(visible=None)[0])
    assert sample.utilization == 0.42
    assert sample.power_watts == 123.456
    assert sample.power_limit_watts == 700.0
    assert sample.memory_total_bytes == 85_899_345_920
    assert sample.memory_used_bytes == 1_073_741_824
    assert nvml.sample(nvml.devices(visible=None)[1]).power_watts is None  # not supported there

    system = SystemMetrics(cpu=False, gpu=True, nvml=nvml)
    assert system.gpu_uuid(1) == "GPU-fake-1"
    assert system.gpu_uuid(5) is None
    system.poll()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(system)
    text = render(registry)
    # perf_analyzer's regex: a line of exactly <name>{gpu_uuid="<uuid>"} <plain decimal>
    for name in ("nv_gpu_utilization", "nv_gpu_power_usage", "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes"):
        assert re.search(rf'\n{name}\{{gpu_uuid="GPU-fake-0"\}} [0-9.]+\n', text), name
    assert 'nv_gpu_memory_total_bytes{gpu_uuid="GPU-fake-0"} 85899345920\n' in text
    assert 'nv_gpu_power_usage{gpu_uuid="GPU-fake-1"}' not in text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["nv_energy_consumption"].type == "counter"
    assert all(sample.value > 0 for sample in families["nv_energy_consumption"].samples)  # J since start
    assert families["nv_gpu_power_limit"].samples[0].value == 700
    system.close()


def test_nvml_missing_means_no_gpu_metrics(tmp_path: Path) -> None:
    assert Nvml.open(str(tmp_path / "missing.so")) is None


class _Lifecycle:
    """The lifecycle's serving table: READY versions only."""

    def __init__(self, *models: SimpleNamespace) -> None:
        self._serving = {model.name: ServingVersions(model, {model.version: model}) for model in models}  # type: ignore[arg-type]

    def serving(self) -> dict[str, ServingVersions]:
        return self._serving


def _ready(name: str, version: int) -> SimpleNamespace:
    """The parts of a READY version the collector reads."""
    return SimpleNamespace(
        name=name, version=version, config=ModelConfig(name=name), statistics=ModelStatistics(name, version)
    )


def test_gpu_instances_label_the_model_series_with_their_gpu() -> None:
    gpu = _ready("on_gpu", 1)
    gpu.statistics.gpu_devices.add(0)
    lifecycle = _Lifecycle(gpu, _ready("on_cpu", 2))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ModelCollector(lifecycle, MetricsOptions(), lambda ordinal: f"GPU-{ordinal}"))  # type: ignore[arg-type]
    text = render(registry)
    assert 'nv_inference_count{gpu_uuid="GPU-0",model="on_gpu",version="1"} 0\n' in text
    assert 'nv_inference_count{model="on_cpu",version="2"} 0\n' in text
