"""'Did you mean': the names close to a misspelled one, for error messages and ``naiad check``.

An error about a name that does not exist (a config field, a backend, an ensemble tensor) is a
:class:`SuggestingError` that carries the close names that do exist, so ``naiad check`` can offer
them on their own while the message stays what the server logs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from naiad.errors import ErrorCode, NaiadError

_MOST_SUGGESTIONS = 3
_CUTOFF = 0.6  # difflib's ratio below which a name is not offered


def close_matches(name: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """The candidates spelled like ``name``, closest first (case-insensitive; ``name`` itself excluded)."""
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        if candidate and candidate != name:
            by_lower.setdefault(candidate.lower(), candidate)
    matches = difflib.get_close_matches(name.lower(), by_lower, n=_MOST_SUGGESTIONS, cutoff=_CUTOFF)
    return tuple(by_lower[match] for match in matches)


def did_you_mean(suggestions: Sequence[str]) -> str:
    """``did you mean 'a'?`` (or ``'a' or 'b'``), or "" when there is nothing to offer."""
    if not suggestions:
        return ""
    return "did you mean " + " or ".join(f"'{suggestion}'" for suggestion in suggestions) + "?"


class SuggestingError(NaiadError):
    """A :class:`NaiadError` about ``name``, which does not exist, with the close names that do
    (``suggestions``, closest first; may be empty)."""

    def __init__(
        self,
        message: str,
        code: ErrorCode = ErrorCode.INVALID_ARG,
        *,
        name: str = "",
        suggestions: Sequence[str] = (),
    ) -> None:
        super().__init__(message, code)
        self.name = name
        self.suggestions = tuple(suggestions)
