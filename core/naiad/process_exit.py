"""How a child process ended, in words for a log line or an error message."""

from __future__ import annotations

import signal


def describe_exit(returncode: int) -> str:
    """``subprocess``'s return code as "was killed by SIGKILL" or "exited with status 3"."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"
