"""Finding 5: a client that keeps hitting a bug costs one log line per request, not a traceback each."""

from __future__ import annotations

import logging
import time

import pytest

from naiad import logs


def _fail() -> ValueError:
    try:
        raise ValueError("boom")
    except ValueError as error:
        return error


def test_one_line_per_error_and_a_traceback_at_most_every_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(logs, "_last_traceback", time.monotonic() - 60)
    monkeypatch.setattr(logs, "_suppressed_tracebacks", 0)
    logger = logging.getLogger("naiad.test_unexpected")
    with caplog.at_level(logging.ERROR, logger=logger.name):
        for request in range(50):
            logs.log_unexpected(logger, "unexpected error in request %d", request, error=_fail())
        records = list(caplog.records)
        assert len(records) == 50
        assert [record.exc_info is not None for record in records] == [True] + [False] * 49
        assert records[1].getMessage() == "unexpected error in request 1: ValueError: boom"

        monkeypatch.setattr(logs, "_last_traceback", time.monotonic() - 11)
        logs.log_unexpected(logger, "unexpected error in request %d", 50, error=_fail())
    last = caplog.records[-1]
    assert last.exc_info is not None
    assert last.getMessage().endswith("(49 tracebacks left out since the last one)")
