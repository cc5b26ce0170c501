"""Logging set-up for the server process."""

from __future__ import annotations

import logging
import sys

_FORMAT = "%(asctime)s.%(msecs)03d %(levelname).1s %(name)s] %(message)s"


def configure_logging(verbose: int = 0, *, info: bool = True, warning: bool = True, error: bool = True) -> None:
    """Log to stderr; ``--log-verbose`` >= 1 adds debug messages, the ``--log-*`` flags drop levels."""
    level = logging.DEBUG if verbose > 0 else logging.INFO
    if not info:
        level = logging.WARNING
    if not warning:
        level = logging.ERROR
    if not error:
        level = logging.CRITICAL
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # uvicorn/hypercorn log every connection error at INFO; keep them for verbose runs only.
    for noisy in ("uvicorn.error", "hypercorn.error", "grpc"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
