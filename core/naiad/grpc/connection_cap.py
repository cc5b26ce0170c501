"""A log line when the gRPC listener is at ``--grpc-max-connections``.

grpc core closes connections past its cap (``grpc.max_allowed_incoming_connections``) without a
word, so a watcher counts the listener's established connections every few seconds (from
``/proc``: this process's sockets whose local port is the listener's) and says so when the count
has reached the cap. It reads the host's TCP tables only while the process holds at least ``cap``
sockets, which a busy host's tables make dear. Where ``/proc`` is missing the watcher does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

CHECK_INTERVAL_S = 2.0
_REPEAT_AFTER_S = 10.0
_ESTABLISHED = "01"
_TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def socket_inodes() -> set[str] | None:
    """The inodes of this process's open sockets; None where /proc is missing."""
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return None
    inodes = set()
    for descriptor in descriptors:
        try:
            target = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def established_connections(port: int, inodes: set[str]) -> int:
    """The established TCP connections on local ``port`` among the sockets ``inodes`` (this process's)."""
    count = 0
    for table in _TCP_TABLES:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "HEXIP:HEXPORT", remote, state, queues, timer, retransmits, uid, timeout, inode
            if fields[3] == _ESTABLISHED and int(fields[1].rpartition(":")[2], 16) == port and fields[9] in inodes:
                count += 1
    return count


async def watch_connection_cap(where: str, port: int, cap: int) -> None:
    """Warn, at most every 10 s, while the listener on ``port`` holds ``cap`` connections or more."""
    loop = asyncio.get_running_loop()
    last_warning = -_REPEAT_AFTER_S
    while True:
        await asyncio.sleep(CHECK_INTERVAL_S)
        inodes = await asyncio.to_thread(socket_inodes)
        if inodes is None:
            return
        if len(inodes) < cap:
            continue  # fewer sockets than the cap: the TCP tables (every socket on the host) need no reading
        count = await asyncio.to_thread(established_connections, port, inodes)
        if count >= cap and loop.time() - last_warning >= _REPEAT_AFTER_S:
            last_warning = loop.time()
            logger.warning(
                "gRPC on %s holds %d connections, its --grpc-max-connections cap: new connections are closed as "
                "they arrive; raise --grpc-max-connections (and ulimit -n) or find the clients holding them open",
                where,
                count,
            )
