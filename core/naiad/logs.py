"""Logging for the server process: levels, formats, model context and safe messages.

* Formats (``--log-format``): ``default`` (alias ``plain``): ``2025-01-31 12:00:00.123 I naiad.x] text``;
  ``ISO8601``: the same with a UTC ISO-8601 timestamp; ``json``: one JSON object per line with
  ``time``, ``level``, ``logger``, ``message`` and, where known, ``model`` and ``version``
  (plus ``exception`` with the traceback).
* Model context: records logged inside :func:`model_context` (loading, unloading) or from a thread
  bound with :func:`bind_threads` (a model version's worker threads) carry that model and version;
  plain lines that do not already name them end with ``[model 'm' version 1]``.
* Safe messages: control characters in the arguments of a log call (client-supplied model names,
  request ids, URL paths) are escaped (``\\n`` -> ``\\x0a``), so a client can never start a new
  log line or forge one. The format string itself is trusted; pass multi-line text that is
  operator-controlled (the startup model table) as :class:`Trusted`.
* :class:`LogControl` holds the settings the logging extension (``GET/POST /v2/logging``, gRPC
  LogSettings) reads and changes. The log file is fixed at startup and cannot be changed at run
  time: a settable path would let any client write files anywhere the server can.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, TextIO

from naiad.errors import ErrorCode, NaiadError, invalid_arg

LOG_FORMATS = ("default", "ISO8601", "json")
"""Canonical format names, as the logging extension reports them."""

_FORMAT_ALIASES = {"default": "default", "plain": "default", "iso8601": "ISO8601", "json": "json"}

_NOISY = ("uvicorn.error", "hypercorn.error", "grpc")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\\]")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # control characters, backslash kept


def canonical_format(name: str) -> str:
    """``default``/``plain``, ``ISO8601`` or ``json`` (any case) -> the canonical name; ValueError otherwise."""
    canonical = _FORMAT_ALIASES.get(name.lower())
    if canonical is None:
        raise ValueError(f"unknown log format '{name}'; choose one of default (plain), ISO8601, json")
    return canonical


def escape(text: str) -> str:
    """``text`` with control characters and backslashes escaped, so it stays on one line."""
    return _CONTROL.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class Trusted(str):
    """Operator-controlled text that may span lines (e.g. the startup table); logged as is."""

    __slots__ = ()


# -- model context ---------------------------------------------------------------------------------

_context: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("naiad_model", default=None)
_threads: dict[int, tuple[str, int]] = {}


@contextlib.contextmanager
def model_context(model: str, version: int) -> Iterator[None]:
    """Records logged inside the block (this thread or task) name ``model`` and ``version``."""
    token = _context.set((model, version))
    try:
        yield
    finally:
        _context.reset(token)


def model_logging_context(model: str, version: int) -> contextvars.Context:
    """A copy of the current context whose records name ``model`` and ``version``: run callbacks and
    tasks in it (``loop.call_soon(..., context=...)``) to have what they log say so."""
    context = contextvars.copy_context()
    context.run(_context.set, (model, version))
    return context


def bind_threads(threads: Iterable[threading.Thread], model: str, version: int) -> list[int]:
    """Records logged from ``threads`` name ``model`` and ``version``; returns their idents."""
    idents = [thread.ident for thread in threads if thread.ident is not None]
    for ident in idents:
        _threads[ident] = (model, version)
    return idents


def unbind_dead_threads() -> None:
    """Forget the bindings of threads that have ended (call after stopping a scheduler)."""
    alive = {thread.ident for thread in threading.enumerate()}
    for ident in list(_threads):
        if ident not in alive:
            _threads.pop(ident, None)


def _model_of(record: logging.LogRecord) -> tuple[str, int | None] | None:
    """The model (and version, if known) a record is about: from ``extra``, the context or the thread."""
    model = getattr(record, "model", None)
    if model is not None:
        return str(model), getattr(record, "version", None)
    return _context.get() or _threads.get(record.thread or 0)


# -- formatting ------------------------------------------------------------------------------------


def safe_message(record: logging.LogRecord) -> str:
    """The record's message with every argument escaped (the format string is trusted)."""
    message = str(record.msg)
    args = record.args
    if not args:
        return message if isinstance(record.msg, Trusted) else _LINE_BREAKS.sub(_escape_one, message)
    if isinstance(args, Mapping):
        return message % {key: _safe_arg(value) for key, value in args.items()}
    return message % tuple(_safe_arg(arg) for arg in args)


def _safe_arg(arg: object) -> object:
    if arg is None or isinstance(arg, int | float | Trusted):
        return arg
    return escape(str(arg))


class _Formatter(logging.Formatter):
    def __init__(self, iso: bool) -> None:
        super().__init__()
        self._iso = iso

    def format(self, record: logging.LogRecord) -> str:
        try:
            message = safe_message(record)
        except Exception:  # a bad format string must not lose the record
            message = escape(f"{record.msg!r} % {record.args!r}")
        model = _model_of(record)
        if model is not None and model[1] is not None and f"version {model[1]}" not in message:
            message += f" [model '{escape(model[0])}' version {model[1]}]"
        stamp = _iso_time(record.created) if self._iso else self._local_time(record)
        line = f"{stamp} {record.levelname[:1]} {record.name}] {message}"
        exception = _exception_text(self, record)
        if exception:
            line += "\n" + exception
        return line

    @staticmethod
    def _local_time(record: logging.LogRecord) -> str:
        local = datetime.datetime.fromtimestamp(record.created)
        return f"{local:%Y-%m-%d %H:%M:%S}.{int(record.msecs):03d}"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        try:
            message = safe_message(record)
        except Exception:
            message = escape(f"{record.msg!r} % {record.args!r}")
        entry: dict[str, Any] = {
            "time": _iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        model = _model_of(record)
        if model is not None:
            entry["model"] = model[0]
            if model[1] is not None:
                entry["version"] = str(model[1])
        exception = _exception_text(self, record)
        if exception:
            entry["exception"] = exception
        return json.dumps(entry, ensure_ascii=False)


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """The record's traceback: from its exception, or already formatted (``exc_text``, as a record
    logged in another process brings it)."""
    if record.exc_info:
        return formatter.formatException(record.exc_info)
    return record.exc_text or ""


def _iso_time(created: float) -> str:
    moment = datetime.datetime.fromtimestamp(created, datetime.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of a canonical format name."""
    if log_format == "json":
        return _JsonFormatter()
    return _Formatter(iso=log_format == "ISO8601")


# -- settings and the logging extension ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogSettings:
    """Triton's log settings (``--log-*`` flags and the logging extension's keys)."""

    file: str = ""
    info: bool = True
    warning: bool = True
    error: bool = True
    verbose: int = 0
    format: str = "default"

    def to_json(self) -> dict[str, Any]:
        """The logging extension's object, keys in Triton's order."""
        return {
            "log_file": self.file,
            "log_info": self.info,
            "log_warning": self.warning,
            "log_error": self.error,
            "log_verbose_level": self.verbose,
            "log_format": self.format,
        }


_BOOL_KEYS = {"log_info": "info", "log_warning": "warning", "log_error": "error"}


class _LevelFilter(logging.Filter):
    """Triton's independent switches: info, warning and error each on or off; debug with verbose > 0."""

    def __init__(self, control: LogControl) -> None:
        super().__init__()
        self._control = control

    def filter(self, record: logging.LogRecord) -> bool:
        settings = self._control.settings
        level = record.levelno
        if level >= logging.ERROR:
            return settings.error
        if level >= logging.WARNING:
            return settings.warning
        if level >= logging.INFO:
            return settings.info
        return settings.verbose > 0


class LogControl:
    """The process's log set-up, and the logging extension's view of it.

    :meth:`install` puts one handler on the root logger (stderr, or ``settings.file``);
    :meth:`update` applies the extension's changes to it at run time.
    """

    def __init__(self, settings: LogSettings | None = None) -> None:
        self.settings = settings or LogSettings()
        self._lock = threading.Lock()
        self._handler: logging.Handler | None = None

    def install(self, stream: TextIO | None = None) -> None:
        """Route every log record through this control's handler (replacing existing handlers)."""
        if self.settings.file:
            handler: logging.Handler = logging.FileHandler(self.settings.file, encoding="utf-8")
        else:
            handler = logging.StreamHandler(stream or sys.stderr)
        handler.addFilter(_LevelFilter(self))
        handler.setFormatter(formatter(self.settings.format))
        root = logging.getLogger()
        for old in root.handlers:
            if old is self._handler:
                old.close()
        root.handlers[:] = [handler]
        self._handler = handler
        self._apply_levels()

    def close(self) -> None:
        """Remove and close the installed handler (tests; the server keeps it for its lifetime)."""
        handler, self._handler = self._handler, None
        if handler is not None:
            root = logging.getLogger()
            if handler in root.handlers:
                root.removeHandler(handler)
            handler.close()

    def _apply_levels(self) -> None:
        verbose = self.settings.verbose
        logging.getLogger().setLevel(logging.DEBUG if verbose > 0 else logging.INFO)
        for noisy in _NOISY:
            # uvicorn/hypercorn log every connection error at INFO; keep them for verbose > 1.
            logging.getLogger(noisy).setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)

    def to_json(self) -> dict[str, Any]:
        return self.settings.to_json()

    def update(self, changes: Mapping[str, object]) -> dict[str, Any]:
        """Apply the extension's changes (all or none) and return the full settings.

        Unknown keys are ignored, as in Triton; ``log_file`` is refused (UNSUPPORTED), a wrong
        type or an unknown format is INVALID_ARG.
        """
        updates: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "log_file":
                raise NaiadError("log file location can not be updated through network protocol", ErrorCode.UNSUPPORTED)
            if key in _BOOL_KEYS:
                if not isinstance(value, bool):
                    raise invalid_arg(f"expect boolean for '{key}'")
                updates[_BOOL_KEYS[key]] = value
            elif key == "log_verbose_level":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise invalid_arg(f"expect unsigned integer for '{key}'")
                updates["verbose"] = value
            elif key == "log_format":
                if not isinstance(value, str):
                    raise invalid_arg(f"expect string for '{key}'")
                try:
                    updates["format"] = canonical_format(value)
                except ValueError:
                    raise invalid_arg(f"invalid argument for log_format, got: {escape(value)}") from None
        with self._lock:
            old = self.settings
            self.settings = replace(old, **updates)
            if self._handler is not None and self.settings.format != old.format:
                self._handler.setFormatter(formatter(self.settings.format))
            if self._handler is not None and self.settings.verbose != old.verbose:
                self._apply_levels()
        return self.settings.to_json()


_TRACEBACK_INTERVAL_S = 10.0
_traceback_lock = threading.Lock()
_last_traceback = 0.0
_suppressed_tracebacks = 0


def log_unexpected(logger: logging.Logger, message: str, *args: object, error: BaseException) -> None:
    """Log an unexpected error of one request: one line each time, its traceback at most every 10 s.

    A client that keeps triggering the same bug then costs one short line per request, not a
    traceback each; the next traceback says how many were left out.
    """
    global _last_traceback, _suppressed_tracebacks
    now = time.monotonic()
    with _traceback_lock:
        with_traceback = now - _last_traceback >= _TRACEBACK_INTERVAL_S
        if with_traceback:
            _last_traceback = now
            skipped, _suppressed_tracebacks = _suppressed_tracebacks, 0
        else:
            _suppressed_tracebacks += 1
    text = message + ": %s: %s"
    arguments = (*args, type(error).__name__, error)
    if not with_traceback:
        logger.error(text, *arguments)
    elif skipped:
        logger.error(text + " (%d tracebacks left out since the last one)", *arguments, skipped, exc_info=error)
    else:
        logger.error(text, *arguments, exc_info=error)


def configure_logging(
    verbose: int = 0,
    *,
    info: bool = True,
    warning: bool = True,
    error: bool = True,
    log_format: str = "default",
    log_file: str = "",
) -> LogControl:
    """Log to stderr (or ``log_file``) with the ``--log-*`` settings; returns the control."""
    control = LogControl(LogSettings(log_file, info, warning, error, verbose, canonical_format(log_format)))
    control.install()
    return control
