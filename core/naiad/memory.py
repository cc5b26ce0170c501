"""Giving the memory of large requests back to the operating system once they are done.

Two things keep freed memory in a glibc process:

* glibc serves big allocations with ``mmap`` only above a threshold that it raises each time such a
  block is freed (up to 32 MiB); after a few large requests, later ones come from the heap arenas,
  which keep their pages after ``free``. :func:`return_large_blocks_to_os` fixes the threshold at
  1 MiB at startup, so every large tensor and body buffer lives in its own mapping.
* Transports (grpc core) receive a large message in many small buffers, served from per-thread
  arenas that keep their pages too. :func:`trim_soon` runs ``malloc_trim`` in a worker thread after
  such a message.

Elsewhere than glibc both do nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024
LARGE_MESSAGE_BYTES = 16 * 1024 * 1024
"""A message at least this large is followed by a trim."""


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _load_trim() -> Callable[[int], int] | None:
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


_malloc_trim = _load_trim()
_trim_lock = threading.Lock()


def trim_soon(size: int) -> None:
    """After a message of ``size`` bytes that counts as large, trim the heap in a worker thread."""
    if _malloc_trim is not None and size >= LARGE_MESSAGE_BYTES:
        asyncio.get_running_loop().run_in_executor(None, _trim)


def _trim() -> None:
    if _malloc_trim is None or not _trim_lock.acquire(blocking=False):
        return  # another trim is under way and gets these pages too
    try:
        _malloc_trim(0)
    finally:
        _trim_lock.release()


def return_large_blocks_to_os() -> bool:
    """Fix glibc's mmap and trim thresholds; False where the C library is not glibc."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_BYTES)
    )
    if not done:
        logger.debug("mallopt refused the thresholds; large buffers may stay in the heap after use")
    return done
