"""Server-wide gauges polled every ``--metrics-interval-ms``: CPU, RAM and (with NVML) each GPU; and
Triton's pinned-memory pool gauges, which are 0: naiad keeps no pinned pool (as Triton's CPU build
reports them)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.metrics_core import Metric

from naiad.metrics.nvml import GpuDevice, GpuSample, Nvml

logger = logging.getLogger(__name__)

_GPU_FAMILIES = (
    ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "gauge", "utilization"),
    ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "gauge", "memory_total_bytes"),
    ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "gauge", "memory_used_bytes"),
    ("nv_gpu_power_usage", "GPU power usage in watts", "gauge", "power_watts"),
    ("nv_gpu_power_limit", "GPU power management limit in watts", "gauge", "power_limit_watts"),
    ("nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started", "counter", None),
)


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy: int
    total: int


def read_cpu_times(proc: Path = Path("/proc")) -> CpuTimes | None:
    """Jiffies spent busy and in total by all CPUs (first line of ``/proc/stat``)."""
    try:
        first = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    values = [int(value) for value in first[1:9]]  # user nice system idle iowait irq softirq steal
    values += [0] * (8 - len(values))
    idle = values[3] + values[4]
    total = sum(values)
    return CpuTimes(total - idle, total)


def read_memory(proc: Path = Path("/proc")) -> tuple[int, int] | None:
    """(total, used) RAM bytes: ``MemTotal`` and ``MemTotal - MemAvailable`` of ``/proc/meminfo``."""
    fields: dict[str, int] = {}
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                fields[key] = int(parts[0]) * 1024
    except (OSError, ValueError):
        return None
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        return None
    return fields["MemTotal"], fields["MemTotal"] - fields["MemAvailable"]


class SystemMetrics:
    """A collector of the host's gauges; :meth:`poll` refreshes them, :meth:`run` polls forever."""

    def __init__(
        self, *, cpu: bool = True, gpu: bool = True, proc: Path = Path("/proc"), nvml: Nvml | None = None
    ) -> None:
        self._cpu = cpu
        self._proc = proc
        self._lock = threading.Lock()
        self._previous = read_cpu_times(proc) if cpu else None
        self._utilization = 0.0
        self._memory: tuple[int, int] | None = read_memory(proc) if cpu else None
        self._nvml = (nvml or Nvml.open()) if gpu else None
        self._devices: list[GpuDevice] = self._nvml.devices() if self._nvml is not None else []
        self._gpu: dict[str, GpuSample] = {}
        self._energy_start: dict[str, float] = {}
        if self._devices:
            self.poll_gpus()
            self._energy_start = {
                uuid: sample.energy_joules for uuid, sample in self._gpu.items() if sample.energy_joules is not None
            }

    def gpu_uuid(self, ordinal: int) -> str | None:
        """The UUID of CUDA device ``ordinal``, if NVML knows it."""
        for device in self._devices:
            if device.ordinal == ordinal:
                return device.uuid
        return None

    def poll(self) -> None:
        """Read every source once (a few small files and NVML calls)."""
        if self._cpu:
            self.poll_cpu()
        if self._devices:
            self.poll_gpus()

    def poll_cpu(self) -> None:
        times = read_cpu_times(self._proc)
        memory = read_memory(self._proc)
        with self._lock:
            previous = self._previous
            if times is not None and previous is not None and times.total > previous.total:
                self._utilization = (times.busy - previous.busy) / (times.total - previous.total)
            if times is not None:
                self._previous = times
            if memory is not None:
                self._memory = memory

    def poll_gpus(self) -> None:
        assert self._nvml is not None
        samples = {device.uuid: self._nvml.sample(device) for device in self._devices}
        with self._lock:
            self._gpu = samples

    async def run(self, interval_s: float) -> None:
        """Poll every ``interval_s`` seconds until cancelled (in a worker thread: NVML may block)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.poll)
            except Exception:
                logger.exception("polling the CPU/GPU metrics failed")

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.close()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            utilization, memory, gpus = self._utilization, self._memory, dict(self._gpu)
        yield _gauge("nv_pinned_memory_pool_total_bytes", "Pinned memory pool total memory size, in bytes", 0)
        yield _gauge("nv_pinned_memory_pool_used_bytes", "Pinned memory pool used memory size, in bytes", 0)
        if self._cpu:
            yield _gauge("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", utilization)
            if memory is not None:
                yield _gauge("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", memory[0])
                yield _gauge("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", memory[1])
        for name, documentation, kind, attribute in _GPU_FAMILIES:
            family = Metric(name, documentation, kind)
            for uuid, sample in gpus.items():
                if attribute is None:
                    start = self._energy_start.get(uuid)
                    value = None if sample.energy_joules is None or start is None else sample.energy_joules - start
                else:
                    value = getattr(sample, attribute)
                if value is not None:
                    family.add_sample(name, {"gpu_uuid": uuid}, value)
            yield family


def _gauge(name: str, documentation: str, value: float) -> Metric:
    family = Metric(name, documentation, "gauge")
    family.add_sample(name, {}, value)
    return family
