"""The last bound on a shutdown that ran past ``--exit-timeout-secs``.

Once the exit timeout passes with requests still in flight, the server stops its frontends (which
cancel what they still serve) and unloads its models; a model whose ``execute`` or ``finalize``
never returns would hold the process forever. The watchdog ends it after a grace period instead.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger("naiad.server")

CLOSE_GRACE_S = 15.0
"""How long the stopping server may take once the exit timeout has passed."""


class ExitWatchdog:
    """Exits the process with code 1 unless :meth:`cancel` is called within ``grace`` seconds."""

    def __init__(self, grace: float = CLOSE_GRACE_S) -> None:
        self._grace = grace
        self._timer = threading.Timer(grace, self._exit_now)
        self._timer.daemon = True
        self._timer.name = "naiad-exit-watchdog"

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()

    def _exit_now(self) -> None:
        logger.error(
            "naiad is still stopping %.0f s after the exit timeout passed: a model's execute or finalize does not "
            "return; exiting now with code 1, without waiting for it",
            self._grace,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)
