"""Schedulers: how queued requests of one model version reach its instances."""

from naiad.scheduling.base import Scheduler
from naiad.scheduling.direct import DirectScheduler
from naiad.scheduling.execution import execute_batch

__all__ = ["DirectScheduler", "Scheduler", "execute_batch"]
