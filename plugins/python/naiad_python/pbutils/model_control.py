"""``pb_utils.is_model_ready``, ``load_model`` and ``unload_model``: the calling model's server does them.

Loading and unloading need ``--model-control-mode=explicit``, as in Triton. Arguments are checked as
Triton's C++ layer checks them; a failure the server reports comes back as a ``TritonModelException``
in Triton's words: ``Failed to load model: Failed to process the request for model '<instance>',
message: <the server's message>``. A model that unloads or reloads itself is answered at once, the
change going on in the background, as in Triton (waiting would wait for the calling request).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator

from naiad.backend import ErrorCode, NaiadError
from naiad_python import loader
from naiad_python.pbutils.caller import calling_unit, server_of
from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.text import text

_log = logging.getLogger("naiad.python")

_FILE_PREFIX = "file:"
_INT64 = range(-(2**63), 2**63)
_STOL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")  # what C++'s std::stol reads of a string


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the model (its latest version, or ``model_version``) is ready to serve."""
    name = text(model_name, "is_model_ready(): 'model_name'")
    version = text(model_version, "is_model_ready(): 'model_version'")
    unit = calling_unit("pb_utils.is_model_ready()")
    server = server_of(unit, "pb_utils.is_model_ready()")
    with _reported("Failed to check model readiness", unit):
        return server.model_ready(name, _version(version))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load or reload a model of the repository, with ``config`` (Triton's JSON) instead of its own and,
    with ``config``, ``files`` (``{"file:1/model.py": b"..."}``) instead of the repository's files."""
    name = text(model_name, "load_model(): 'model_name'")
    config_json = text(config, "load_model(): 'config'")
    overrides = _file_overrides(name, files)
    unit = calling_unit("pb_utils.load_model()")
    server = server_of(unit, "pb_utils.load_model()")
    _control(unit, name, "Failed to load model", lambda: server.load_model(name, config_json or None, overrides))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload every version of a model and, with ``unload_dependents``, the models it needs that no
    other model needs."""
    name = text(model_name, "unload_model(): 'model_name'")
    unit = calling_unit("pb_utils.unload_model()")
    server = server_of(unit, "pb_utils.unload_model()")
    dependents = bool(unload_dependents)
    _control(unit, name, "Failed to unload model", lambda: server.unload_model(name, unload_dependents=dependents))


def _control(unit: loader.ModelUnit, target: str, failure: str, change: Callable[[], None]) -> None:
    """Run a load or unload; of the calling model itself, in the background."""
    if target != unit.model_name:
        with _reported(failure, unit):
            change()
        return

    def in_background() -> None:
        try:
            with _reported(failure, unit):
                change()
        except TritonModelException as error:
            _log.error("model '%s' changing itself: %s", target, error.message())

    threading.Thread(target=in_background, name=f"naiad-model-control-{target}", daemon=True).start()


@contextlib.contextmanager
def _reported(failure: str, unit: loader.ModelUnit) -> Iterator[None]:
    """The server's refusal as the model sees it in Triton."""
    try:
        yield
    except NaiadError as error:
        raise TritonModelException(
            f"{failure}: Failed to process the request for model '{unit.instance}', message: {error.message}"
        ) from None


def _file_overrides(name: str, files: object) -> dict[str, bytes] | None:
    """The ``file:`` entries of ``files`` (others are not files, and are ignored, as in Triton)."""
    if files is None:
        return None
    if not isinstance(files, dict):
        raise TritonModelException(
            f"failed to load model '{name}', files should be a dictionary of file paths and file contents"
        )
    overrides: dict[str, bytes] = {}
    for key, content in files.items():
        path = text(key, "load_model(): a key of 'files'")
        if not isinstance(content, bytes):
            raise TypeError(f"Object of type '{type(content).__name__}' is not an instance of 'bytes'")
        if path.startswith(_FILE_PREFIX):
            overrides[path] = bytes(content)
    return overrides or None


def _version(version: str) -> str:
    """The version as the server takes it ("" for the latest), read as Triton reads it (``std::stol``:
    leading digits, ``"1.0"`` is 1); a version that is no number, or below 0, is refused."""
    if not version:
        return ""
    match = _STOL.match(version)
    number = int(match.group()) if match is not None else None
    if number is None or number not in _INT64:
        raise NaiadError(
            f"failed to get model version from specified version string '{version}' (details: stol), version "
            "should be an integral value > 0",
            ErrorCode.INVALID_ARG,
        )
    if number < 0:
        raise NaiadError(
            f"failed to get model version from specified version string '{version}', version should be an "
            "integral value > 0",
            ErrorCode.INVALID_ARG,
        )
    return str(number)
