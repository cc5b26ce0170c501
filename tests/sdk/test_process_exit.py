"""Backends word how their child processes ended the same way."""

from __future__ import annotations

import subprocess
import sys

import pytest

from naiad.backend import describe_exit


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("import os; os.kill(os.getpid(), 9)", "was killed by SIGKILL"),
        ("raise SystemExit(3)", "exited with status 3"),
        ("pass", "exited with status 0"),
    ],
)
def test_a_child_s_end_in_words(code: str, words: str) -> None:
    child = subprocess.run([sys.executable, "-c", code], check=False)
    assert describe_exit(child.returncode) == words


def test_a_signal_python_does_not_name_is_given_by_number() -> None:
    assert describe_exit(-99) == "was killed by signal 99"
