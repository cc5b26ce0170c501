"""Loading one version of a python model: the checks and auto-complete done before instances."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from naiad.backend import BackendModel, ErrorCode, InstanceContext, ModelLoadContext, NaiadError
from naiad_python import autocomplete
from naiad_python.isolation import environments
from naiad_python.loader import ModelFileError

DEFAULT_MODEL_FILENAME = "model.py"
ISOLATION_PARAMETER = "INSTANCE_ISOLATION"
ISOLATION_MODES = ("thread", "process")

if TYPE_CHECKING:
    from naiad_python.isolation.spawn import Spawned

_log = logging.getLogger("naiad.python")

# Config parameters of Triton's python backend that naiad accepts but does not act on.
_IGNORED_PARAMETERS = {
    "FORCE_CPU_ONLY_INPUT_TENSORS": "inputs are always CPU tensors",
}


class PythonModel(BackendModel):
    """A loaded python model version; each instance imports its own copy of the model file."""

    def __init__(
        self, context: ModelLoadContext, model_file: Path, interpreter: Path | None = None, spare: Spawned | None = None
    ) -> None:
        self.name = context.model_name
        self.version = context.version
        self.model_dir = context.model_dir
        self.model_file = model_file
        self.interpreter = interpreter  # EXECUTION_ENV_PATH's, for the workers; None: the server's
        self._spare = spare  # the worker that ran auto_complete_config, for the first instance
        self._lock = threading.Lock()

    def take_spare(self) -> Spawned | None:
        """The worker left from auto-complete, once (None after, or without one)."""
        with self._lock:
            spare, self._spare = self._spare, None
        return spare

    def finalize(self) -> None:
        """Stop the worker left from auto-complete if no instance took it."""
        spare = self.take_spare()
        if spare is not None:
            from naiad_python.isolation.spawn import retire

            retire(spare)


def isolation_of(context: ModelLoadContext | InstanceContext) -> str:
    """Where instances run: ``"process"`` (each in a worker process, the default, as in Triton) or
    ``"thread"`` (in the server process)."""
    parameters = context.config.parameters
    own_environment = environments.ENV_PARAMETER in parameters
    parameter = parameters.get(ISOLATION_PARAMETER)
    mode = parameter.string_value.strip().lower() if parameter is not None else "process"
    if mode not in ISOLATION_MODES:
        raise NaiadError(
            f"python model '{context.model_name}': config parameter {ISOLATION_PARAMETER} is '{mode}'; "
            f"use one of {', '.join(ISOLATION_MODES)}",
            ErrorCode.INVALID_ARG,
        )
    if mode == "thread" and own_environment:
        raise NaiadError(
            f"python model '{context.model_name}': {environments.ENV_PARAMETER} needs a worker process; "
            f'remove {ISOLATION_PARAMETER} "thread" (or set it to "process")',
            ErrorCode.INVALID_ARG,
        )
    return mode


def model_file_of(context: ModelLoadContext) -> Path:
    """``<version dir>/<default_model_filename or model.py>``."""
    return context.version_dir / (context.config.default_model_filename or DEFAULT_MODEL_FILENAME)


def load_model(context: ModelLoadContext, model_file: Path | None = None) -> PythonModel:
    """Check the model file (the version's own, or a python-based backend's ``model_file``), run
    ``auto_complete_config`` when asked, and return the model."""
    model_file = model_file or model_file_of(context)
    where = f"python model '{context.model_name}' version {context.version}"
    if model_file.suffix != ".py":
        raise NaiadError(
            f"failed to load {where}: Model name must end with '.py'. Model name is \"{model_file.name}\"; "
            "set default_model_filename to a .py file",
            ErrorCode.INVALID_ARG,
        )
    if not model_file.is_file():
        raise NaiadError(f"failed to load {where}: Python model file not found in '{model_file}'", ErrorCode.NOT_FOUND)
    for key, reason in _IGNORED_PARAMETERS.items():
        if key in context.config.parameters:
            _log.warning("%s: config parameter %s is ignored by naiad (%s)", where, key, reason)
    isolated = isolation_of(context) == "process"  # a wrong value fails the load, not the first instance
    interpreter = environments.interpreter_for(context)
    spare = None
    if context.auto_complete:
        try:
            spare = autocomplete.complete_config(context, model_file, interpreter, isolated)
        except ModelFileError as error:  # pragma: no cover - checked above, kept for races
            raise NaiadError(f"failed to load {where}: {error}", ErrorCode.NOT_FOUND) from error
    return PythonModel(context, model_file, interpreter, spare)
