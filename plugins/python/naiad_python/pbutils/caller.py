"""The model calling a ``pb_utils`` API, found from the running code, and the server it runs in."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from naiad_python import loader
from naiad_python.pbutils.errors import TritonModelException

if TYPE_CHECKING:
    from naiad.backend import ServerHandle


def calling_unit(api: str) -> loader.ModelUnit:
    """The unit whose code called ``api`` (the nearest model frame up the stack)."""
    unit = loader.unit_of_caller(sys._getframe(1))
    if unit is None:
        raise TritonModelException(
            f"{api} only works when called from a model's code (model.py or a module it imports); "
            "naiad finds the model from the calling code"
        )
    return unit


def server_of(unit: loader.ModelUnit, api: str) -> ServerHandle:
    """The server ``unit`` was loaded in."""
    if unit.server is None:
        raise TritonModelException(
            f"{api} needs a server, and model '{unit.model_name}' was loaded without one (in a test harness "
            "that loads models on their own, not in a server)"
        )
    return unit.server


def calling_server(api: str) -> ServerHandle:
    """The server of the model whose code called ``api``."""
    return server_of(calling_unit(api), api)
