"""JSON bodies as Triton writes them: compact, with text in UTF-8 rather than ``\\u`` escapes."""

from __future__ import annotations

import json
from typing import Any


def dump_json(document: Any) -> bytes:
    """``document`` as a compact UTF-8 JSON body, non-finite floats as ``Infinity``/``NaN``.

    Text read from bytes that are not UTF-8 (kept as surrogate escapes) is written back as those
    bytes, as Triton passes them through; a lone surrogate that stands for no byte is written as
    its ``\\u`` escape.
    """
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return json.dumps(document, separators=(",", ":")).encode()
