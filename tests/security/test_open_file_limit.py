"""The server raises its soft open-file limit to the hard one, so connection caps refuse clients first."""

from __future__ import annotations

import resource
from pathlib import Path

from naiad.testing import start_server

from .http_helpers import EXAMPLES


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no 'Max open files' line in /proc/<pid>/limits")


def test_a_low_soft_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256
    assert hard == resource.RLIM_INFINITY or hard > low, "this host's hard limit leaves nothing to raise"
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        server = start_server([EXAMPLES], "--model-control-mode", "explicit")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        raised = _soft_open_files(server.process.pid)
        assert raised > low
        assert hard == resource.RLIM_INFINITY or raised == hard
        assert "may open only" not in server.logs()
    finally:
        assert server.stop() == 0
