"""The hooks a naiad plugin can implement.

Backends are plugins registered under their backend name through the entry-point group
``naiad.backends``. naiad calls the *lifecycle* hooks of exactly one backend, the one a
model's config names, and never broadcasts them to every plugin. The objects those hooks
return (:class:`naiad.backend.BackendModel`, :class:`naiad.backend.ModelInstance`) are
then called directly, so serving a request costs no hook call.

*Observer* hooks are broadcast to every registered plugin; their results are ignored.

Implement a hook with ``@naiad.hookimpl`` on a function of the same name in the module
the entry point names::

    import naiad

    @naiad.hookimpl
    def naiad_load_model(context):
        ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext
    from naiad.server_info import ServerInfo

PROJECT_NAME = "naiad"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -- lifecycle hooks: called on the model's own backend only ------------------------------


@hookspec(firstresult=True)
def naiad_load_model(context: ModelLoadContext) -> BackendModel | None:
    """Load one version of a model and return the backend's model object.

    Called once per model version, on a loader thread (never on the event loop), with
    ``context.config`` holding the model's configuration. When ``context.auto_complete``
    is true, complete the config in place from the model file: inputs, outputs,
    ``max_batch_size`` and, for batching models, ``dynamic_batching``. Raise
    :class:`naiad.errors.NaiadError` (or any exception) with a message that names the
    file and what is wrong to make this version UNAVAILABLE; other models keep serving.

    First non-None result wins.
    """


@hookspec(firstresult=True)
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance | None:
    """Create one instance of a loaded model on the device ``context`` names.

    Called ``instance_group.count`` times per instance group, after the config was
    completed, normalised and validated (``context.config``). Instances must not share
    mutable state unless that state is safe to use from several threads: each instance
    executes on its own worker thread.

    First non-None result wins.
    """


# -- observer hooks: broadcast to every registered plugin ------------------------------------


@hookspec
def naiad_server_configured(server: ServerInfo) -> None:
    """The server finished reading its options and is about to load models."""


@hookspec
def naiad_model_state_changed(model_name: str, version: int, state: str, reason: str) -> None:
    """A model version changed state (``LOADING``, ``READY``, ``UNLOADING``, ``UNAVAILABLE``)."""
