"""``pb_utils.is_model_ready``, ``load_model`` and ``unload_model``: the calling model's server does them.

Loading and unloading need ``--model-control-mode=explicit``, as in Triton; otherwise, and on
any other failure, the server's message comes back as a ``TritonModelException``.
"""

from __future__ import annotations

from collections.abc import Mapping

from naiad.backend import NaiadError, config_from_json
from naiad_python.pbutils.caller import calling_server
from naiad_python.pbutils.errors import TritonModelException


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the model (its latest version, or ``model_version``) is ready to serve."""
    server = calling_server("pb_utils.is_model_ready()")
    return server.model_ready(model_name, _version(model_version))


def load_model(model_name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
    """Load or reload a model of the repository, with ``config`` (Triton's JSON) instead of its own."""
    if files is not None:
        raise TritonModelException(
            "pb_utils.load_model(): the 'files' argument (model files sent with the load) is not supported by "
            "naiad; put the files in the model repository and load the model by name"
        )
    server = calling_server("pb_utils.load_model()")
    try:
        server.load_model(model_name, config_from_json(config) if config else None)
    except NaiadError as error:
        raise TritonModelException(error.message) from None


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload every version of a model."""
    if unload_dependents:
        raise TritonModelException(
            "pb_utils.unload_model(): unload_dependents=True is not supported by naiad; unload the models "
            f"'{model_name}' depends on by name"
        )
    server = calling_server("pb_utils.unload_model()")
    try:
        server.unload_model(model_name)
    except NaiadError as error:
        raise TritonModelException(error.message) from None


def _version(model_version: str) -> str:
    """The version as the server takes it: "" (and Triton's -1) for the latest."""
    text = str(model_version).strip()
    if not text:
        return ""
    try:
        number = int(text)
    except ValueError:
        raise TritonModelException(f"Failed to convert model version '{model_version}' to an integer") from None
    return "" if number == -1 else str(number)
