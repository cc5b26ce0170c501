"""naiad's own implementations of backend hooks, used when a model's backend gives none.

Registered with every plugin manager under the name ``naiad-defaults``, marked ``trylast`` so a
backend's own implementation always wins.
"""

from __future__ import annotations

from naiad.backend_model import BackendModel
from naiad.contexts import SchedulerContext
from naiad.hookspecs import hookimpl
from naiad.scheduling import build_scheduler
from naiad.scheduling.base import Scheduler


@hookimpl(trylast=True)
def naiad_create_scheduler(model: BackendModel, context: SchedulerContext) -> Scheduler:
    """The sequence batcher, the dynamic batcher or one request at a time, as the config says."""
    return build_scheduler(context)
