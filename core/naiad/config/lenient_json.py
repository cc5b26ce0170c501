"""A load request's config JSON as Triton reads it: protobuf's JSON parser also takes single-quoted
strings, unquoted keys and a comma before a closing bracket (Triton's own QA sends ``direct: {...}``).

:func:`loads` reads strict JSON first; only text that is not strict JSON is rewritten into it, so a
document that is still not JSON is refused with the strict parser's message.
"""

from __future__ import annotations

import json
from typing import Any

_IDENTIFIER_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENTIFIER = _IDENTIFIER_START | frozenset("0123456789")


def loads(text: str) -> Any:
    """The document ``text`` holds; raises :class:`json.JSONDecodeError` (the strict parser's)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as strict:
        try:
            return json.loads(_as_strict_json(text))
        except json.JSONDecodeError:
            raise strict from None


def _as_strict_json(text: str) -> str:
    parts: list[str] = []
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char in "\"'":
            close = _string_end(text, index)
            body = text[index + 1 : close]
            if char == "'":  # the same text, in double quotes
                body = body.replace("\\'", "'").replace('"', '\\"')
            parts.append(f'"{body}"')
            index = close + 1
        elif char in _IDENTIFIER_START:
            start = index
            while index < end and text[index] in _IDENTIFIER:
                index += 1
            word = text[start:index]
            is_key = text[index:].lstrip().startswith(":")
            parts.append(json.dumps(word) if is_key else word)
        elif char == "," and text[index + 1 :].lstrip()[:1] in ("}", "]"):
            index += 1  # a trailing comma
        else:
            parts.append(char)
            index += 1
    return "".join(parts)


def _string_end(text: str, start: int) -> int:
    """Where the string opened at ``start`` closes (the end of the text if it never does)."""
    quote, index = text[start], start + 1
    while index < len(text) and text[index] != quote:
        index += 2 if text[index] == "\\" else 1
    return index
