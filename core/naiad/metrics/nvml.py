"""The few NVML calls the GPU metrics need, through ctypes (no Python package, no CUDA).

``libnvidia-ml.so.1`` comes with the NVIDIA driver; on a host without it :meth:`Nvml.open` returns
None and the GPU families are simply absent, as in Triton on a CPU-only host.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

LIBRARY = "libnvidia-ml.so.1"
_SUCCESS = 0
_UUID_BUFFER = 96


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU; None where the device does not support the query."""

    utilization: float | None  # 0.0 - 1.0
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    power_watts: float | None
    power_limit_watts: float | None
    energy_joules: float | None  # since the driver loaded


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """A GPU the server may use: its CUDA ordinal, NVML handle and UUID."""

    ordinal: int
    handle: Any
    uuid: str


class Nvml:
    """An initialised NVML library."""

    def __init__(self, library: Any) -> None:
        self._lib = library

    @classmethod
    def open(cls, name: str = LIBRARY) -> Nvml | None:
        """NVML if the driver library loads and initialises, else None (logged at debug level)."""
        try:
            library = ctypes.CDLL(name)
        except OSError as error:
            logger.debug("no GPU metrics: %s", error)
            return None
        init = getattr(library, "nvmlInit_v2", None) or getattr(library, "nvmlInit", None)
        if init is None or init() != _SUCCESS:
            logger.debug("no GPU metrics: NVML did not initialise")
            return None
        return cls(library)

    def close(self) -> None:
        shutdown = getattr(self._lib, "nvmlShutdown", None)
        if shutdown is not None:
            shutdown()

    def devices(self, visible: str | None = None) -> list[GpuDevice]:
        """The GPUs visible to the process, by CUDA ordinal (``CUDA_VISIBLE_DEVICES`` honoured).

        ``visible`` defaults to the environment variable; entries are NVML indices or UUID
        prefixes, as CUDA reads them. Without it, CUDA ordinals are NVML (PCI bus) indices.
        """
        count = ctypes.c_uint(0)
        if self._call("nvmlDeviceGetCount_v2", ctypes.byref(count)) is None:
            return []
        everything: list[tuple[Any, str]] = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if self._call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle)) is None:
                continue
            buffer = ctypes.create_string_buffer(_UUID_BUFFER)
            if self._call("nvmlDeviceGetUUID", handle, buffer, ctypes.c_uint(_UUID_BUFFER)) is None:
                continue
            everything.append((handle, buffer.value.decode("ascii", "replace")))
        chosen = _visible(everything, os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible)
        return [GpuDevice(ordinal, handle, uuid) for ordinal, (handle, uuid) in enumerate(chosen)]

    def sample(self, device: GpuDevice) -> GpuSample:
        """Utilisation, memory, power and energy of one GPU."""
        handle = device.handle
        utilization = _Utilization()
        memory = _Memory()
        power = ctypes.c_uint(0)
        limit = ctypes.c_uint(0)
        energy = ctypes.c_ulonglong(0)
        got_utilization = self._call("nvmlDeviceGetUtilizationRates", handle, ctypes.byref(utilization))
        got_memory = self._call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory))
        got_power = self._call("nvmlDeviceGetPowerUsage", handle, ctypes.byref(power))
        got_limit = self._call("nvmlDeviceGetEnforcedPowerLimit", handle, ctypes.byref(limit))
        got_energy = self._call("nvmlDeviceGetTotalEnergyConsumption", handle, ctypes.byref(energy))
        return GpuSample(
            utilization=None if got_utilization is None else utilization.gpu / 100.0,
            memory_total_bytes=None if got_memory is None else int(memory.total),
            memory_used_bytes=None if got_memory is None else int(memory.used),
            power_watts=None if got_power is None else power.value / 1000.0,
            power_limit_watts=None if got_limit is None else limit.value / 1000.0,
            energy_joules=None if got_energy is None else energy.value / 1000.0,
        )

    def _call(self, function: str, *args: Any) -> bool | None:
        """True on NVML_SUCCESS; None if the call is missing or fails (e.g. NOT_SUPPORTED)."""
        method = getattr(self._lib, function, None)
        if method is None:
            return None
        return True if method(*args) == _SUCCESS else None


def _visible(devices: Sequence[tuple[Any, str]], setting: str | None) -> list[tuple[Any, str]]:
    if setting is None:
        return list(devices)
    chosen: list[tuple[Any, str]] = []
    for entry in (item.strip() for item in setting.split(",")):
        if not entry:
            continue
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if index < 0 or index >= len(devices):
                break  # CUDA stops at the first invalid entry
            chosen.append(devices[index])
            continue
        matches = [device for device in devices if device[1].startswith(entry)]
        if len(matches) != 1:
            break
        chosen.append(matches[0])
    return chosen
