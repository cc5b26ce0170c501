"""Finding the line of ``config.pbtxt`` that a problem is about, when protobuf did not say."""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUOTED_IN_MESSAGE = re.compile(r"'([^'\s]+)'")


def field_line(text: str, field: str) -> int | None:
    """The first line that sets ``field`` (``field:`` or ``field {``), 1-based."""
    pattern = re.compile(rf"(^|[\s{{\[,]){re.escape(field)}\s*[:{{\[]")
    return _first_line(text, pattern)


def value_line(text: str, value: str) -> int | None:
    """The first line holding ``value`` as a quoted string, 1-based."""
    pattern = re.compile(rf"[\"']{re.escape(value)}[\"']")
    return _first_line(text, pattern)


def line_of_message(text: str, message: str, names: Iterable[str] = ()) -> int | None:
    """The line of the first of ``names``, then of the first name quoted in ``message``, that the config quotes."""
    for name in (*names, *_QUOTED_IN_MESSAGE.findall(message)):
        line = value_line(text, name)
        if line is not None:
            return line
    return None


def _first_line(text: str, pattern: re.Pattern[str]) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line.split("#", 1)[0]):
            return number
    return None
