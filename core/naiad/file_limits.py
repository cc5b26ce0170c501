"""Raising the process's open-file limit so the connection caps, not the kernel, refuse clients."""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger(__name__)

_LINUX_NR_OPEN = 1 << 20


def raise_open_file_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return the soft limit now in force.

    Each HTTP, metrics and gRPC listener may hold its ``--*-max-connections`` sockets; with a soft
    limit of 1024 (the default on many hosts) new connections would fail with EMFILE first.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Linux refuses an unlimited soft limit for files; its default ceiling (fs.nr_open) is 2**20.
    target = _LINUX_NR_OPEN if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as error:
        logger.debug("could not raise the open-file limit from %d to %d: %s", soft, target, error)
        return soft
    return target
