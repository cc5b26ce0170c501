"""How ``naiad serve --help`` shows its options: one line each, with the default where there is one."""

from __future__ import annotations

import argparse

SERVE_USAGE = "%(prog)s --model-repository DIR [--model-repository DIR ...] [options]"

SERVE_EPILOG = (
    "Flag names are tritonserver's; boolean flags take a value: true or false. "
    "Every flag, with its default and what it changes: docs/cli.md."
)


class ServeHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: ...)`` to an option's help, leaving it out where it would say nothing:
    repeatable flags (default: none given), switches, unset values, and help that names its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = _shown_default(action)
        if shown is None or "(default" in text:
            return text
        return f"{text} (default: {shown.replace('%', '%%')})"


def _shown_default(action: argparse.Action) -> str | None:
    """The default as the command line spells it, or None when there is nothing worth showing."""
    default = action.default
    if not action.option_strings or action.nargs == 0 or default in (None, "", [], argparse.SUPPRESS):
        return None
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)
