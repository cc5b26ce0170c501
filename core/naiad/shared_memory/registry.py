"""The server's registered shared-memory regions, system and CUDA, under one namespace (as Triton's).

Frontends register, unregister and report regions here, and resolve a request's
``shared_memory_region``/``_offset``/``_byte_size`` parameters to a checked window of one. A
region is in use while a window of it lives (a decoded request holds its windows until it is
answered): unregistering a region in use is refused, as Triton refuses it.
"""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from naiad.errors import ErrorCode, NaiadError, invalid_arg, not_found, unsupported
from naiad.shared_memory.cuda import CudaRegion, CudaRuntime, CudaWindow, no_gpu
from naiad.shared_memory.system import SystemRegion

Region = SystemRegion | CudaRegion

logger = logging.getLogger(__name__)

SYSTEM = "system"
CUDA = "cuda"


@dataclass(frozen=True, slots=True)
class RegionReference:
    """A request's pointer into a region: the three ``shared_memory_*`` parameters of a tensor."""

    region: str
    offset: int
    byte_size: int


@dataclass(frozen=True, slots=True, weakref_slot=True, eq=False)
class Window:
    """A checked window of a region: host memory (``memory``) or device memory (``device``)."""

    name: str
    byte_size: int
    memory: memoryview | None = None
    device: CudaWindow | None = None


class SharedMemoryRegistry:
    """Registered regions by name; safe to use from any thread."""

    def __init__(self) -> None:
        self._regions: dict[str, Region] = {}
        self._windows: dict[str, weakref.WeakSet[Window]] = {}  # the live windows of each region
        self._lock = threading.Lock()
        # Looking for a CUDA device starts the driver (a fraction of a second on a GPU machine): it is
        # done once, on a thread of its own, from the start, never on the event loop of a request.
        self._cuda: tuple[CudaRuntime | None, str] = (None, "the CUDA runtime was not probed")
        self._probe = threading.Thread(target=self._probe_cuda, name="naiad-cuda-probe", daemon=True)
        self._probe.start()

    # -- the CUDA runtime ----------------------------------------------------------------------

    @property
    def cuda_available(self) -> bool:
        return self._cuda_runtime()[0] is not None

    def _probe_cuda(self) -> None:
        try:
            self._cuda = CudaRuntime.probe()
        except Exception as error:  # a broken CUDA install must not stop the server
            self._cuda = (None, f"probing the CUDA runtime failed: {type(error).__name__}: {error}")

    def _cuda_runtime(self) -> tuple[CudaRuntime | None, str]:
        self._probe.join()
        return self._cuda

    # -- registration --------------------------------------------------------------------------

    def register_system(self, name: str, key: str, offset: int, byte_size: int) -> None:
        with self._lock:
            self._check_free(name)
            self._regions[name] = SystemRegion(name, key, offset, byte_size)

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        runtime, reason = self._cuda_runtime()
        if runtime is None:
            raise no_gpu(name, reason)
        with self._lock:
            self._check_free(name)
            self._regions[name] = CudaRegion(runtime, name, raw_handle, device_id, byte_size)

    def _check_free(self, name: str) -> None:
        if name in self._regions:
            raise NaiadError(f"shared memory region '{name}' already in manager", ErrorCode.ALREADY_EXISTS)

    def unregister(self, kind: str, name: str = "") -> None:
        """Forget one region of ``kind`` (no error if there is none), or every one of ``kind``; a region a
        request still uses stays, and is named in the error (INTERNAL, Triton's words)."""
        in_use = self._remove(kind, name)
        if in_use:  # an answered request's windows may wait in a reference cycle for the collector
            gc.collect()
            in_use = self._remove(kind, name)
        if in_use and name:
            raise NaiadError(f"Cannot unregister shared memory region '{name}', it is currently in use.")
        if in_use:
            label = "cuda" if kind == CUDA else "system"
            message = f"Failed to unregister the following {label} shared memory regions: " + "".join(
                f"{n} ," for n in in_use
            )
            logger.error("%s (requests in flight still use them; unregister them once answered)", message)
            raise NaiadError(message)

    def _remove(self, kind: str, name: str) -> list[str]:
        """Remove region ``name`` of ``kind`` (every one: ``""``) unless in use; the names in use."""
        with self._lock:
            names = [name] if name else sorted(self._regions)
            of_kind = [n for n in names if n in self._regions and self._regions[n].kind == kind]
            in_use = [n for n in of_kind if self._windows.get(n)]
            removed = [self._regions.pop(n) for n in of_kind if n not in in_use]
            for region in removed:
                self._windows.pop(region.name, None)
        for region in removed:
            region.close()
        return in_use

    def status(self, kind: str, name: str = "") -> list[dict[str, Any]]:
        """The status of one region of ``kind``, or of every one (by name, as Triton lists them)."""
        with self._lock:
            if not name:
                return [region.status() for _, region in sorted(self._regions.items()) if region.kind == kind]
            region = self._regions.get(name)
        label = "cuda" if kind == CUDA else "system"
        if region is None:
            raise not_found(f"Unable to find {label} shared memory region: '{name}'")
        if region.kind != kind:
            registered, asked = ("CUDA", "system") if region.kind == CUDA else ("system", "CUDA")
            raise not_found(
                f"The region named '{name}' is registered as {registered} shared memory, not {asked} shared memory"
            )
        return [region.status()]

    def close(self) -> None:
        """Forget every region, in use or not (the server is stopping; a view still held keeps its memory)."""
        with self._lock:
            removed = list(self._regions.values())
            self._regions.clear()
            self._windows.clear()
        for region in removed:
            region.close()

    # -- windows for requests ------------------------------------------------------------------

    def window(self, reference: RegionReference, *, writable: bool) -> Window:
        """The checked window ``reference`` names, to read an input from or write an output to."""
        with self._lock:
            region = self._regions.get(reference.region)
        if region is None:
            raise not_found(f"Unable to find shared memory region: '{reference.region}'")
        offset, byte_size = reference.offset, reference.byte_size
        if not 0 <= offset < region.byte_size:
            raise invalid_arg(f"Invalid offset for shared memory region: '{reference.region}'")
        if byte_size <= 0 or offset + byte_size > region.byte_size:
            raise invalid_arg(f"Invalid offset + byte size for shared memory region: '{reference.region}'")
        if isinstance(region, CudaRegion):
            window = Window(region.name, byte_size, device=region.window(offset, byte_size))
        else:
            view = region.write_view(offset, byte_size) if writable else region.read_view(offset, byte_size)
            window = Window(region.name, byte_size, memory=view)
        with self._lock:
            if self._regions.get(reference.region) is region:
                self._windows.setdefault(region.name, weakref.WeakSet()).add(window)
        return window


def window_of(registry: SharedMemoryRegistry | None, reference: RegionReference, *, writable: bool) -> Window:
    """The window ``reference`` names in ``registry``; UNSUPPORTED where a decoder was given none."""
    if registry is None:
        raise unsupported("shared memory is not available on this endpoint")
    return registry.window(reference, writable=writable)
