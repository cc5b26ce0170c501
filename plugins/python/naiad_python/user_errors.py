"""How exceptions raised by model code are caught and reported."""

from __future__ import annotations

# What model code may raise without taking anything else down (Triton catches every Python
# exception its stub sees, ``sys.exit()`` included).
USER_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)


def describe(error: BaseException) -> str:
    """``"<ExceptionType>: <message>"``, the form Triton reports Python exceptions in."""
    return f"{type(error).__name__}: {error}"
