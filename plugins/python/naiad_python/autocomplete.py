"""``TritonPythonModel.auto_complete_config``: let the model fill in its own config.

The model file is imported in a throw-away unit (Triton uses a throw-away interpreter), in a
throw-away worker process when the model's instances run in workers (so its code never runs in the
server process, and runs in its own environment when it has one); the static method gets a
``pb_utils.ModelConfig`` built from the config's Triton JSON, and the dict it returns replaces
``context.config``; naiad validates the result afterwards.
"""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naiad.backend import ErrorCode, ModelLoadContext, NaiadError
from naiad_python import loader
from naiad_python.pbutils.model_config import ModelConfig
from naiad_python.user_errors import USER_ERRORS, describe_traced

if TYPE_CHECKING:
    from naiad.backend import ServerHandle
    from naiad_python.isolation.spawn import Spawned

_log = logging.getLogger("naiad.python")


def complete_config(
    context: ModelLoadContext, model_file: Path, interpreter: Path | None, isolated: bool
) -> Spawned | None:
    """Run the model's ``auto_complete_config`` (if it has one) and store the result in ``context.config``:
    in a worker process with ``interpreter`` when the model's instances run in workers (that worker is
    returned, for the first instance), in this one otherwise."""
    from naiad.backend import ModelConfig as ConfigMessage
    from naiad.backend import config_from_json, config_to_json_dict, fill_load_defaults, gpu_count
    from naiad_python import naiad_backend_info

    name = context.model_name
    shown = ConfigMessage()  # what Triton shows the model: its config with the load-time defaults
    shown.CopyFrom(context.config)
    fill_load_defaults(shown, gpu_count=gpu_count(), info=naiad_backend_info())
    config_dict = config_to_json_dict(shown)
    for key, default in (("name", name), ("max_batch_size", 0), ("input", []), ("output", [])):
        config_dict.setdefault(key, default)
    spare: Spawned | None = None
    if isolated:
        from naiad_python.isolation.spawn import auto_complete_in_worker, retire

        result, spare = auto_complete_in_worker(context, model_file, config_dict, interpreter)
    else:
        result = completed_config(name, context.version, context.model_dir, model_file, config_dict, context.server)
    if result is not None:
        try:
            context.config.CopyFrom(config_from_json(result))
        except Exception as error:
            if spare is not None:
                retire(spare)
            raise NaiadError(
                f"auto_complete_config function in model '{name}' returned an invalid config: {error}",
                ErrorCode.INVALID_ARG,
            ) from error
    return spare


def completed_config(
    name: str,
    version: int,
    model_dir: Path,
    model_file: Path,
    config_dict: dict[str, Any],
    server: ServerHandle | None,
) -> dict[str, Any] | None:
    """Import ``model_file`` in a throw-away unit and run its ``auto_complete_config`` on ``config_dict``
    (Triton's JSON); the completed config, or None when the model has no such method."""
    try:
        unit = loader.load_model_module(
            model_name=name,
            version=version,
            model_dir=model_dir,
            model_file=model_file,
            tag="auto_complete",
            server=server,
        )
    except loader.ModelFileError:
        raise
    except USER_ERRORS as error:  # any failure of user code fails this model only
        _log.error("failed to import %s for auto-complete", model_file, exc_info=True)
        raise NaiadError(describe_traced(error, inspect.currentframe()), ErrorCode.INTERNAL) from error
    try:
        model_class = getattr(unit.module, "TritonPythonModel", None)
        if model_class is None:
            raise NaiadError(
                f"python model file '{model_file}' of model '{name}' does not define class TritonPythonModel",
                ErrorCode.INVALID_ARG,
            )
        method = getattr(model_class, "auto_complete_config", None)
        if method is None:
            return None
        try:
            result = method(ModelConfig(json.dumps(config_dict)))
        except USER_ERRORS as error:
            _log.error("auto_complete_config of model '%s' failed", name, exc_info=True)
            raise NaiadError(describe_traced(error, inspect.currentframe()), ErrorCode.INTERNAL) from error
        if not isinstance(result, ModelConfig):
            raise NaiadError(
                f"auto_complete_config function in model '{name}' must return a valid pb.ModelConfig object.",
                ErrorCode.INTERNAL,
            )
        completed: dict[str, Any] = result.as_dict()
        return completed
    finally:
        loader.unload_model_module(unit)
