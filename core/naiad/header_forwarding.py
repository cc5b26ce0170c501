"""Triton's ``--http-header-forward-pattern`` and ``--grpc-header-forward-pattern``.

An inference request's HTTP headers (gRPC metadata) whose name matches the pattern, anywhere in it
and ignoring case, as Triton matches them, reach the model as string request parameters named after
the header as the client sent it (lower-cased under hypercorn, whose ASGI scope is all naiad sees).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from naiad.inference import ParameterValue

_LEADING_FLAGS = re.compile(r"\(\?([A-Za-z]*-?[A-Za-z]*)\)")


def _scoped(pattern: str) -> str:
    """``pattern`` with its leading flag groups made scoped ones: Triton's RE2 lets ``(?-i)X`` set the
    flags for the rest of the pattern (Triton's own ``(?i)`` goes first); Python's ``re`` takes that
    as ``(?-i:X)``."""
    match = _LEADING_FLAGS.match(pattern)
    if match is None or not match.group(1).strip("-"):
        return pattern
    return f"(?{match.group(1)}:{_scoped(pattern[match.end() :])})"


class HeaderForwarding:
    """The headers one frontend forwards to models as request parameters."""

    def __init__(self, pattern: str) -> None:
        try:
            self._regex = re.compile(_scoped(pattern), re.IGNORECASE)
        except re.error as error:
            raise ValueError(f"header forward pattern '{pattern}' is not a regular expression: {error}") from None

    def parameters(
        self, parameters: dict[str, ParameterValue], headers: Iterable[tuple[str, str]]
    ) -> dict[str, ParameterValue]:
        """``parameters`` with the matching headers added (a header wins over a parameter of its name)."""
        forwarded = {name: value for name, value in headers if self._regex.search(name)}
        return {**parameters, **forwarded} if forwarded else parameters


def with_headers(
    forwarding: HeaderForwarding | None, parameters: dict[str, ParameterValue], headers: Iterable[tuple[str, str]]
) -> dict[str, ParameterValue]:
    """``parameters`` as the model gets them through a frontend that forwards ``forwarding``'s headers."""
    return parameters if forwarding is None else forwarding.parameters(parameters, headers)
