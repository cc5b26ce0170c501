"""``naiad serve --help`` explains every option and its default; a bad value names the flag and what it takes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from naiad.cli import build_parser


def _serve_parser() -> argparse.ArgumentParser:
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.choices["serve"]
    return parser


def _naiad(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "naiad", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_every_serve_option_has_a_help_line() -> None:
    options = [action for action in _serve_parser()._actions if action.option_strings]
    assert len(options) > 40
    assert [action.option_strings[0] for action in options if not action.help or "\n" in action.help] == []


def test_serve_help_shows_defaults_and_points_to_the_docs() -> None:
    shown = _naiad("serve", "--help")
    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: naiad serve --model-repository DIR")
    text = " ".join(shown.stdout.split())
    assert "--http-port PORT HTTP/REST port (default: 8000)" in text
    assert "--strict-readiness BOOL true: /v2/health/ready is 200 only while every model is READY" in text
    assert "only the server's state counts (default: true)" in text
    assert (
        "--exit-timeout-secs SECONDS how long shutdown waits for in-flight requests; past it naiad stops without "
        "them and exits 1 (default: 30.0)"
    ) in text
    assert "(default: [])" not in text  # repeatable flags have no default to show
    assert "(default: None)" not in text
    assert text.endswith("Every flag, with its default and what it changes: docs/cli.md.")


def test_a_bad_port_names_the_flag_and_the_range() -> None:
    refused = _naiad("serve", "--model-repository", ".", "--http-port", "abc")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "usage: naiad serve --model-repository DIR [--model-repository DIR ...] [options]",
        "naiad serve: error: argument --http-port: 'abc' is not a port number (0-65535)",
    ]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--grpc-port", "70000", "'70000' is not a port number (0-65535)"),
        ("--metrics-port", "-1", "'-1' is not a port number (0-65535)"),
        ("--allow-grpc", "maybe", "'maybe' is not a boolean: use true or false (1/0, yes/no, on/off)"),
        ("--grpc-stream-backlog", "many", "'many' is not a whole number > 0"),
        ("--http-max-connections", "0", "'0' is not a whole number > 0"),
        ("--grpc-keepalive-time", "1.5", "'1.5' is not a whole number >= 0"),
        ("--log-verbose", "-1", "'-1' is not a whole number >= 0"),
        ("--http-idle-timeout", "soon", "'soon' is not a number of seconds > 0"),
        ("--exit-timeout-secs", "-3", "'-3' is not a number of seconds >= 0"),
        ("--repository-poll-secs", "nan", "'nan' is not a number of seconds >= 0"),
        ("--model-config-name", "", "empty argument for --model-config-name"),  # Triton's words
    ],
)
def test_a_bad_value_names_the_flag_and_what_it_takes(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--model-repository", ".", flag, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"naiad serve: error: argument {flag}: {message}"
