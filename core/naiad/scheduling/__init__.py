"""naiad's own schedulers: how queued requests of one model version reach its instances.

They are the default implementation of the ``naiad_create_scheduler`` hook: a backend that returns
no scheduler of its own gets the one its config asks for from :func:`build_scheduler`.
"""

from __future__ import annotations

from naiad.contexts import SchedulerContext
from naiad.scheduling.base import Scheduler
from naiad.scheduling.direct import DirectScheduler
from naiad.scheduling.dynamic import DynamicScheduler
from naiad.scheduling.sequence import SequenceScheduler

__all__ = ["DirectScheduler", "DynamicScheduler", "Scheduler", "SequenceScheduler", "build_scheduler"]


def build_scheduler(context: SchedulerContext) -> Scheduler:
    """The scheduler a config asks for: the sequence batcher, the dynamic batcher, or one request at a time."""
    config = context.config
    if config.HasField("sequence_batching"):
        return SequenceScheduler(context)
    if config.HasField("dynamic_batching"):
        return DynamicScheduler(context)
    return DirectScheduler(context)
