"""Text arguments as Triton's C++ layer takes them: a ``str``, or ``bytes`` read as UTF-8.

Triton's ``pb_utils`` classes and functions are C++ (pybind11); where they take a string, ``bytes``
(a BYTES tensor's element, ``numpy.bytes_``) are accepted as the text they hold, and anything else
is a ``TypeError``. Models rely on the former: a BLS target named by a BYTES input, for one.
"""

from __future__ import annotations

from collections.abc import Sequence


def text(value: object, where: str) -> str:
    """``value`` as text; ``where`` names the argument in the ``TypeError`` for anything else."""
    if isinstance(value, str):
        return str(value)  # a plain str, also for numpy.str_
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"{where} must be a str (or bytes holding UTF-8 text), not {type(value).__name__}")


def texts(values: object, where: str) -> list[str]:
    """A list of text arguments; a single ``str`` or ``bytes`` is refused, not read as its characters."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"{where} must be a list of str, not {type(values).__name__}")
    return [text(value, f"{where}[{index}]") for index, value in enumerate(values)]
