"""The hooks a naiad plugin can implement.

Backends are plugins registered under their backend name through the entry-point group
``naiad.backends``. naiad calls the *backend* hooks of exactly one backend, the one a model's
config names, and never broadcasts them to every plugin. The objects those hooks return
(:class:`naiad.backend.BackendModel`, :class:`naiad.backend.ModelInstance`,
:class:`naiad.backend.Scheduler`) are then called directly, so serving a request costs no hook
call.

*Server* hooks are broadcast to every registered plugin.

Implement a hook with ``@naiad.hookimpl`` on a function of the same name in the module the entry
point names::

    import naiad

    @naiad.hookimpl
    def naiad_load_model(context):
        ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.routing import BaseRoute

    from naiad.backend_info import BackendInfo
    from naiad.backend_model import BackendModel, ModelInstance
    from naiad.contexts import BackendContext, InstanceContext, ModelLoadContext, SchedulerContext
    from naiad.scheduling.base import Scheduler
    from naiad.server_handle import ServerHandle
    from naiad.server_info import ServerInfo

PROJECT_NAME = "naiad"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -- backend hooks: called on the model's own backend only ---------------------------------------


@hookspec(firstresult=True)
def naiad_backend_info() -> BackendInfo | None:
    """What this backend serves: platforms, model files, instance defaults, capabilities.

    Called once per server, when naiad reads the installed backends, before any model loads; keep
    it free of heavy imports. Without it naiad uses Triton's defaults for a backend of that name.
    """


@hookspec
def naiad_backend_initialize(context: BackendContext) -> None:
    """The backend is about to load its first model (Triton's ``TRITONBACKEND_Initialize``).

    Called once, on a loader thread. ``context`` carries the backend's ``--backend-config``
    settings and the server handle. Raising makes every model of this backend UNAVAILABLE.
    """


@hookspec
def naiad_backend_finalize() -> None:
    """The server is stopping and every model of this backend is unloaded (``TRITONBACKEND_Finalize``)."""


@hookspec(firstresult=True)
def naiad_load_model(context: ModelLoadContext) -> BackendModel | None:
    """Load one version of a model and return the backend's model object.

    Called once per model version, on a loader thread (never on the event loop), with
    ``context.config`` holding the model's configuration. When ``context.auto_complete`` is true,
    complete the config in place from the model file: inputs, outputs, ``max_batch_size`` and, for
    batching models, ``dynamic_batching``. Raise :class:`naiad.errors.NaiadError` (or any
    exception) with a message that names the file and what is wrong to make this version
    UNAVAILABLE; other models keep serving.

    First non-None result wins.
    """


@hookspec(firstresult=True)
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Create one instance of a loaded model on the device ``context`` names.

    Called ``instance_group.count`` times per instance group (per GPU for KIND_GPU), after
    :meth:`BackendModel.configured`. Instances must not share mutable state unless that state is
    safe to use from several threads: each instance executes on its own worker thread.

    First non-None result wins.
    """


@hookspec(firstresult=True)
def naiad_create_scheduler(model: BackendModel, context: SchedulerContext) -> Scheduler | None:
    """The scheduler that admits this model's requests and gets them executed (Triton's enqueue).

    Return None to use naiad's own: the sequence batcher, the dynamic batcher or one request at a
    time, as the config says. A backend with its own engine loop (iteration-level batching, an
    async engine) returns a scheduler that feeds it. Called after the instances are created.

    First non-None result wins.
    """


# -- server hooks: broadcast to every registered plugin ------------------------------------------


@hookspec(firstresult=True)
def naiad_backend_from_directory(name: str, directory: Path) -> object | None:
    """A plugin object serving backend ``name``, which no installed distribution provides, from its
    folder ``<--backend-directory>/<name>`` (Triton's python-based backends: ``<name>/model.py``).

    Return an object whose methods are hook implementations of the backend hooks above, or None if
    this plugin cannot serve what the folder holds. Called once per such backend name, after the
    installed backends are imported. First non-None result wins.
    """


@hookspec
def naiad_server_configured(server: ServerInfo) -> None:
    """The server finished reading its options and is about to load models."""


@hookspec
def naiad_model_state_changed(model_name: str, version: int, state: str, reason: str) -> None:
    """A model version changed state (``LOADING``, ``READY``, ``UNLOADING``, ``UNAVAILABLE``)."""


@hookspec
def naiad_http_routes(server: ServerHandle) -> Sequence[BaseRoute]:
    """Starlette routes the HTTP frontend serves next to KServe's (e.g. an OpenAI-compatible ``/v1/``).

    Called once when the HTTP frontend starts. A route in KServe's ``/v2`` namespace is refused.
    """
    return ()
