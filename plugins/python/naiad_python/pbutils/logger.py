"""``pb_utils.Logger``: model logging routed to Python's :mod:`logging`.

Messages go to the logger ``naiad.python.model`` with the caller's file and line. Triton's
VERBOSE level becomes ``logging.DEBUG``, so verbose messages show up only when the server
logs at debug level (Triton: ``--log-verbose=1``).
"""

from __future__ import annotations

import enum
import logging

from naiad_python.pbutils.text import text

LOGGER_NAME = "naiad.python.model"

_logger = logging.getLogger(LOGGER_NAME)


class LogLevel(enum.IntEnum):
    """Triton's log levels."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_TO_LOGGING = {
    LogLevel.INFO: logging.INFO,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
    LogLevel.VERBOSE: logging.DEBUG,
}


class Logger:
    """Static logging helpers: ``pb_utils.Logger.log_info("…")``."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        """Log ``message`` at ``level`` (``Logger.INFO`` by default)."""
        _emit(message, level, stacklevel=3)

    @staticmethod
    def log_info(message: str) -> None:
        """Log at INFO."""
        _emit(message, LogLevel.INFO, stacklevel=3)

    @staticmethod
    def log_warn(message: str) -> None:
        """Log at WARNING."""
        _emit(message, LogLevel.WARNING, stacklevel=3)

    @staticmethod
    def log_error(message: str) -> None:
        """Log at ERROR."""
        _emit(message, LogLevel.ERROR, stacklevel=3)

    @staticmethod
    def log_verbose(message: str) -> None:
        """Log at VERBOSE (``logging.DEBUG``)."""
        _emit(message, LogLevel.VERBOSE, stacklevel=3)


def _emit(message: str, level: int, *, stacklevel: int) -> None:
    if not isinstance(level, LogLevel):  # a plain number too, as Triton's C++ layer refuses it
        raise TypeError(f"Logger.log(): the level must be Logger.INFO, WARNING, ERROR or VERBOSE, not {level!r}")
    python_level = _TO_LOGGING[level]
    _logger.log(python_level, "%s", text(message, "Logger: the message"), stacklevel=stacklevel)
