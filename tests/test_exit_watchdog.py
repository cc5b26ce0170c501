"""The exit watchdog ends a process whose shutdown outlives the exit timeout, and only then."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import logging, sys, time
from naiad.exit_watchdog import ExitWatchdog
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
watchdog = ExitWatchdog(grace=0.2)
watchdog.start()
if sys.argv[1] == "cancel":
    watchdog.cancel()
time.sleep(1.0)
print("finished")
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", PROGRAM, mode]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def test_a_shutdown_that_outlives_its_grace_exits_with_code_1_and_says_why() -> None:
    ended = _run("hang")
    assert ended.returncode == 1
    assert "finished" not in ended.stdout
    assert "naiad is still stopping 0 s after the exit timeout passed" in ended.stderr
    assert "exiting now with code 1" in ended.stderr


def test_a_cancelled_watchdog_lets_the_process_finish() -> None:
    ended = _run("cancel")
    assert (ended.returncode, ended.stdout.strip()) == (0, "finished")
    assert "still stopping" not in ended.stderr
