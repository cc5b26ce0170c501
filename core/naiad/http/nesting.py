"""JSON nesting: Triton's ``HTTP_MAX_JSON_NESTING_DEPTH`` for tensor data, and a parser that cannot recurse out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from naiad.errors import NaiadError, invalid_arg

MAX_NESTING_DEPTH = 100
"""Triton's ``HTTP_MAX_JSON_NESTING_DEPTH``: how deep a tensor's ``data`` arrays may nest."""


def too_deep() -> NaiadError:
    """Triton's INVALID_ARG for JSON nested deeper than :data:`MAX_NESTING_DEPTH`."""
    return invalid_arg(f"JSON nesting depth exceeds maximum allowed limit ({MAX_NESTING_DEPTH})")


ObjectHook = Callable[[list[tuple[str, Any]]], Any]
"""What builds each JSON object from its members (``json.loads``'s ``object_pairs_hook``)."""


def loads(data: bytes | bytearray | str, object_pairs_hook: ObjectHook | None = None) -> Any:
    """``json.loads``; a document nested deeper than the parser can go is Triton's nesting error (400).

    Parse errors (``ValueError``) are the caller's to word.
    """
    try:
        return json.loads(data, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise too_deep() from None
