"""naiad's ``fil`` backend: XGBoost, LightGBM and scikit-learn (Treelite) tree models, served like Triton's FIL.

Only the hooks live here; the engines and their libraries are imported when a model loads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import naiad
from naiad.backend import BackendInfo

if TYPE_CHECKING:
    from naiad.backend import InstanceContext, ModelInstance, ModelLoadContext
    from naiad_fil.model import FilModel


@naiad.hookimpl
def naiad_backend_info() -> BackendInfo:
    """FIL models name their backend: no platform, and their file depends on ``model_type``."""
    return BackendInfo("fil")


@naiad.hookimpl
def naiad_load_model(context: ModelLoadContext) -> FilModel:
    """Load a FIL model version and complete its config (see :mod:`naiad_fil.loader`)."""
    from naiad_fil.loader import load_model

    return load_model(context)


@naiad.hookimpl
def naiad_create_instance(model: FilModel, context: InstanceContext) -> ModelInstance:
    """One instance with its own engine on the device ``context`` names."""
    from naiad_fil.model import FilInstance

    engine = model.engine_for(context.kind, context.device_id)
    try:
        small_batches = model.cpu_engine_for_small_batches() if context.kind == "GPU" else None
    except BaseException:
        engine.close()
        raise
    logging.getLogger("naiad.fil").info(
        "model '%s' instance '%s': %s", context.model_name, context.name, engine.description
    )
    return FilInstance(context.config, model, engine, small_batches)
