"""Log records of a worker process, logged by the server as its own.

The worker's handler sends each record (message already formatted, traceback as text) on the work
socket; the server logs it under the same logger name, file and line, naming the model and version,
so the server's log format, file and level apply to what a model logs in its worker as they do to
what it logs in the server process.
"""

from __future__ import annotations

import logging
from typing import Any

from naiad_python.isolation.channel import Channel, ChannelClosed, Message

_FIELDS = ("name", "levelno", "levelname", "pathname", "filename", "module", "lineno", "funcName", "created", "msecs")


class ForwardingHandler(logging.Handler):
    """Sends every record to the server (worker side)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self._channel = channel
        self._tracebacks = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        fields: dict[str, Any] = {name: getattr(record, name) for name in _FIELDS}
        try:
            fields["msg"] = record.getMessage()
            if record.exc_info:
                fields["exc_text"] = self._tracebacks.formatException(record.exc_info)
            self._channel.send({"op": "log", "record": fields})
        except ChannelClosed:
            pass  # the server is gone; the worker exits on its own
        except Exception:
            self.handleError(record)


def log_forwarded(message: Message, model: str, version: int) -> None:
    """Log a record a worker sent (server side), as the model's."""
    fields = dict(message["record"])
    fields.update(args=None, exc_info=None, model=model, version=version)
    record = logging.makeLogRecord(fields)
    logger = logging.getLogger(record.name)
    if logger.isEnabledFor(record.levelno):
        logger.handle(record)
