"""The event loop naiad serves on: uvloop's when it is installed, asyncio's otherwise."""

from __future__ import annotations

import asyncio


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the kind the server runs (for ``asyncio.Runner(loop_factory=...)``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
