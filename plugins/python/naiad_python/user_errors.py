"""How exceptions raised by model code are caught and reported.

Triton's stub reports a Python exception as pybind11's ``error_already_set::what()`` writes it: the
type, the message, and an ``At:`` block with a ``  <file>(<line>): <function>`` line per frame, from
the frame that raised outward along ``f_back``, each at its current line. :func:`describe_traced`
writes the same text. Triton calls the model from C++, so its list ends with the model's outermost
frame; naiad calls it from Python, so the walk stops at the naiad frame that called the model, and
naiad's own frames on the way are left out (Triton's stub and ``pb_utils`` internals are C++ and
have none).
"""

from __future__ import annotations

import inspect
from types import FrameType

# What model code may raise without taking anything else down: as Triton's stub, every Python
# exception, ``sys.exit()``, ``KeyboardInterrupt`` and other ``BaseException`` subclasses included (they
# took a worker process down, or left a thread-isolated instance hanging).
USER_ERRORS: tuple[type[BaseException], ...] = (BaseException,)

_NAIAD_PACKAGES = frozenset({"naiad", "naiad_python", "triton_python_backend_utils"})


def describe(error: BaseException) -> str:
    """``"<ExceptionType>: <message>"``, how Triton names a Python exception (without the ``At:`` block)."""
    return f"{type(error).__name__}: {_message(error)[0]}"


def describe_traced(error: BaseException, caller: FrameType | None) -> str:
    """Triton's text for ``error``: :func:`describe`'s and the ``At:`` block of its frames up to
    ``caller``, the naiad frame that ran the model's code (None: every frame), then, when ``str(error)``
    raised, that exception's own report."""
    message, unreadable = _message(error)
    at = _at_block(error, caller)
    text = f"{type(error).__name__}: {message}{at}"
    if unreadable is not None:
        text += ("" if at else "\n") + "\nMESSAGE UNAVAILABLE DUE TO EXCEPTION: "
        text += describe_traced(unreadable, inspect.currentframe())
    return text


def _message(error: BaseException) -> tuple[str, Exception | None]:
    """``str(error)`` as pybind11 writes it, and what ``str`` raised instead, if it did."""
    try:
        text = str(error)
    except Exception as unreadable:
        return "<MESSAGE UNAVAILABLE DUE TO ANOTHER EXCEPTION>", unreadable
    return text.encode("utf-8", "backslashreplace").decode("utf-8") or "<EMPTY MESSAGE>", None


def _at_block(error: BaseException, caller: FrameType | None) -> str:
    """``"\\n\\nAt:\\n"`` and the frame lines; empty when none of the frames is the model's."""
    traceback = error.__traceback__
    if traceback is None:
        return ""
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    lines = []
    frame: FrameType | None = traceback.tb_frame
    while frame is not None and frame is not caller:
        if str(frame.f_globals.get("__name__")).partition(".")[0] not in _NAIAD_PACKAGES:
            lines.append(f"  {frame.f_code.co_filename}({frame.f_lineno}): {frame.f_code.co_name}\n")
        frame = frame.f_back
    return "\n\nAt:\n" + "".join(lines) if lines else ""
