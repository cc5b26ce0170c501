"""System shared-memory regions: a window of a POSIX shared-memory object, mapped into the server.

Only objects under ``/dev/shm`` are opened (a key is a POSIX shared-memory name: an optional
leading ``/``, then no other ``/`` and no ``..``), without following symbolic links. A region is
mapped read-only when registered; the first output written to it maps it again for writing, so a
region only ever used for inputs is never writable in the server. Every window a request asks for
is checked against the registered size before any access, and the object's size is checked again
at each use (a client that shrinks the object after registering it would otherwise make an access
fault). Unregistering closes the mappings at once unless a request still holds a view of them; then
the last view to go unmaps them.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
import threading
from typing import Any

from naiad.errors import NaiadError, invalid_arg, not_found

SHM_DIRECTORY = "/dev/shm"
RESERVED_PREFIXES = ("triton_python_backend_shm_region_",)
"""Key prefixes of the server's own regions, which clients may not register."""


class SystemRegion:
    """A registered window ``[offset, offset + byte_size)`` of the shared-memory object ``key``."""

    kind = "system"

    def __init__(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self.name = name
        self.key = key
        self.offset = offset
        self.byte_size = byte_size
        self._fd, self._writable_fd = _open(name, key)
        self._lock = threading.Lock()
        self._read: mmap.mmap | None = None
        self._write: mmap.mmap | None = None
        try:
            size = os.fstat(self._fd).st_size
            if byte_size == 0 or offset + byte_size > size:
                raise invalid_arg(
                    f"failed to register shared memory region '{name}': invalid args (offset {offset} + byte_size "
                    f"{byte_size} must be within the {size} bytes of '{key}', and byte_size above 0)"
                )
            self._read = self._map(mmap.PROT_READ)
        except OSError as error:  # mmap refused the object
            os.close(self._fd)
            raise invalid_arg(
                f"failed to register shared memory region '{name}': cannot map '{key}': {error}"
            ) from None
        except BaseException:
            os.close(self._fd)
            raise

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}

    def read_view(self, offset: int, byte_size: int) -> memoryview:
        """A read-only view of ``byte_size`` bytes at ``offset`` into the region (bounds already checked)."""
        with self._lock:
            mapping = self._usable(self._read, offset, byte_size)
        return memoryview(mapping)[self._start + offset : self._start + offset + byte_size]

    def write_view(self, offset: int, byte_size: int) -> memoryview:
        """A writable view of ``byte_size`` bytes at ``offset`` (bounds already checked)."""
        with self._lock:
            if self._write is None:
                if not self._writable_fd:
                    raise invalid_arg(
                        f"shared memory region '{self.name}' is read-only: the server may only read '{self.key}'; "
                        "give the server's user write permission on it to receive outputs there"
                    )
                self._write = self._map(mmap.PROT_READ | mmap.PROT_WRITE)
            mapping = self._usable(self._write, offset, byte_size)
        return memoryview(mapping)[self._start + offset : self._start + offset + byte_size]

    def close(self) -> None:
        """Forget the object; each mapping is unmapped now, or when the last view of it goes."""
        with self._lock:
            mappings = [mapping for mapping in (self._read, self._write) if mapping is not None]
            self._read = self._write = None
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        for mapping in mappings:
            with contextlib.suppress(BufferError):  # a request still uses it: unmapped when its views go
                mapping.close()

    @property
    def _start(self) -> int:
        """Where the registered window starts in the mapping (mappings start on a page boundary)."""
        return self.offset % mmap.ALLOCATIONGRANULARITY

    def _map(self, protection: int) -> mmap.mmap:
        aligned = self.offset - self._start
        return mmap.mmap(self._fd, self._start + self.byte_size, mmap.MAP_SHARED, protection, offset=aligned)

    def _usable(self, mapping: mmap.mmap | None, offset: int, byte_size: int) -> mmap.mmap:
        if mapping is None or self._fd < 0:  # unregistered since it was looked up
            raise not_found(f"Unable to find shared memory region: '{self.name}'")
        size = os.fstat(self._fd).st_size
        if self.offset + offset + byte_size > size:
            raise invalid_arg(
                f"shared memory region '{self.name}' no longer fits in '{self.key}': the object shrank to {size} "
                f"bytes after it was registered at offset {self.offset} with {self.byte_size} bytes; "
                "unregister the region and register it again"
            )
        return mapping


def validate_key(name: str, key: str) -> str:
    """The object's file name under ``/dev/shm`` for a POSIX shared-memory ``key``; refused keys raise."""
    stripped = key[1:] if key.startswith("/") else key
    if not stripped or "/" in stripped or stripped in (".", "..") or "\0" in stripped:
        raise invalid_arg(
            f"cannot register shared memory region '{name}' - invalid shm key '{key}': a key names a POSIX "
            "shared-memory object, '/name' with no other '/' (paths and '..' are refused)"
        )
    for prefix in RESERVED_PREFIXES:
        if stripped.startswith(prefix):
            raise invalid_arg(
                f"cannot register shared memory region '{name}' with key '{key}' as the key contains the reserved "
                f"prefix '{prefix}'"
            )
    return stripped


def _open(name: str, key: str) -> tuple[int, bool]:
    """A descriptor of the object (read-write if allowed, else read-only) and whether it may be written."""
    path = os.path.join(SHM_DIRECTORY, validate_key(name, key))
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd, writable = os.open(path, os.O_RDWR | flags), True
    except PermissionError:
        fd, writable = _open_read_only(path, key, flags), False
    except OSError as error:
        raise _unable_to_open(key, error) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise invalid_arg(f"cannot register shared memory region '{name}': '{key}' is not a shared-memory object")
    except BaseException:
        os.close(fd)
        raise
    return fd, writable


def _open_read_only(path: str, key: str, flags: int) -> int:
    try:
        return os.open(path, os.O_RDONLY | flags)
    except OSError as error:
        raise _unable_to_open(key, error) from None


def _unable_to_open(key: str, error: OSError) -> NaiadError:
    reason = "no such object" if error.errno == errno.ENOENT else os.strerror(error.errno or 0)
    return NaiadError(
        f"Unable to open shared memory region: '{key}' ({reason} under {SHM_DIRECTORY}; create it before "
        "registering, e.g. with tritonclient.utils.shared_memory.create_shared_memory_region)"
    )
