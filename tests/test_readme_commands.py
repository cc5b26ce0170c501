"""The README's ``naiad ...`` commands work as printed on a fresh clone: ``make setup`` installs naiad into
``.venv`` only, so the README has the reader activate it before the first such command."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
ACTIVATE = "source .venv/bin/activate"


def test_the_readme_activates_the_venv_before_its_first_naiad_command() -> None:
    commands = [match.start() for match in re.finditer(r"(?:`|^)naiad [a-z]", README, flags=re.MULTILINE)]
    assert commands, "the README shows no `naiad ...` command any more: drop this test"
    assert ACTIVATE in README, f"the README runs `naiad` from .venv without saying `{ACTIVATE}`"
    first = README[commands[0] :].partition("\n")[0]
    assert README.index(ACTIVATE) < commands[0], f"`{ACTIVATE}` comes after the first naiad command: {first}"
