"""Handing back the memory grpc core used for a large message.

grpc core receives (and sends) a message in many small buffers, which glibc serves from its
per-thread heap arenas; once they are freed those arenas keep the pages, so after a 256 MiB
message the process stays a few hundred MiB larger than it needs to be (the mmap threshold of
:mod:`naiad.memory` does not help: the buffers are small). After a large message, or once a call
that carried one has ended, :func:`naiad.memory.trim_soon` gives the pages back.
"""

from __future__ import annotations

from typing import Any

from naiad.memory import LARGE_MESSAGE_BYTES, trim_soon


def trim_after_call(context: Any, size: int) -> None:
    """Trim the heap once the call of ``context`` has ended, if it carried a large message."""
    if size >= LARGE_MESSAGE_BYTES:
        context.add_done_callback(lambda _context: trim_soon(size))
