"""Every ``naiad serve`` and ``naiad check`` flag has a row in docs/cli.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from naiad.cli import build_parser

CLI_DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _flags(command: str) -> list[str]:
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    parser = commands.choices[command]
    return [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]


def test_every_check_flag_is_documented() -> None:
    flags = [flag for flag in _flags("check") if flag != "--help"]
    assert "--format" in flags
    text = CLI_DOC.read_text().split("# `naiad check`", 1)[1]
    assert [flag for flag in flags if f"`{flag}" not in text] == []


def test_every_serve_flag_is_documented() -> None:
    flags = [flag for flag in _flags("serve") if flag != "--help"]
    assert "--http-max-input-size" in flags
    text = CLI_DOC.read_text()
    assert [flag for flag in flags if f"`{flag}" not in text] == []
