"""Triton's scheduler test hooks: environment variables its QA sets so that requests pile up before
the first batch forms, making batch sizes predictable enough to assert.

* ``TRITONSERVER_DELAY_SCHEDULER=N``: a dynamic batcher, and each instance of an ``oldest`` sequence
  batcher, forms no batch until N requests wait in its queue; a ``direct`` sequence batcher none until
  the slot queues of all its instances hold N together.
* ``TRITONSERVER_BACKLOG_DELAY_SCHEDULER=M``: with the first, a ``direct`` sequence batcher also waits
  until M requests wait in the backlog (sequences without a slot).

Once met, the hold ends for good. The values are read as C's ``atoi`` reads them (a leading number,
anything else 0: no hold), when the model's scheduler is made.
"""

from __future__ import annotations

import logging
import os
import re

logger = logging.getLogger(__name__)

DELAY_VARIABLE = "TRITONSERVER_DELAY_SCHEDULER"
BACKLOG_DELAY_VARIABLE = "TRITONSERVER_BACKLOG_DELAY_SCHEDULER"
POLL_S = 0.01  # how often a held scheduler looks again, as Triton's


def _count(variable: str) -> int:
    match = re.match(r"\s*[+-]?\d+", os.environ.get(variable, ""))
    return max(int(match.group()), 0) if match else 0


class StartHold:
    """Holds a scheduler's first batch until enough requests are queued; then never again."""

    def __init__(self, model_name: str, *, with_backlog: bool = False) -> None:
        self.queued = _count(DELAY_VARIABLE)
        self.backlog = _count(BACKLOG_DELAY_VARIABLE) if with_backlog and self.queued else 0
        if self.queued:
            logger.info(
                "Delaying scheduler for model '%s' until %d queued requests%s (%s, a Triton test hook)",
                model_name,
                self.queued,
                f" and {self.backlog} backlog queued requests" if self.backlog else "",
                DELAY_VARIABLE,
            )

    def holding(self, queued: int, backlog: int = 0) -> bool:
        """Whether batches still wait, with ``queued`` requests in the queues and ``backlog`` in the backlog."""
        if not self.queued:
            return False
        if queued < self.queued or backlog < self.backlog:
            return True
        self.queued = self.backlog = 0
        return False
