"""naiad: serve Triton model repositories over KServe v2 HTTP and gRPC, with backends as plugins.

The public API is :mod:`naiad.backend` (everything a backend uses), :mod:`naiad.testing` (test
helpers), :mod:`naiad.embedded` (naiad in-process: :class:`Server` and its responses, re-exported
here with :class:`NaiadError`, :class:`ErrorCode` and :class:`Tensor`) and :data:`hookimpl`. Every
other module is internal and may change without notice.
"""

import importlib
from typing import TYPE_CHECKING, Any

from naiad.errors import ErrorCode, NaiadError
from naiad.hookspecs import hookimpl

if TYPE_CHECKING:
    __version__: str  # the installed distribution's, from the repository's VERSION file
    from naiad.embedded import AsyncResponseStream, Response, ResponseStream, Server
    from naiad.tensor import Tensor

_LAZY = {
    "AsyncResponseStream": "naiad.embedded",
    "Response": "naiad.embedded",
    "ResponseStream": "naiad.embedded",
    "Server": "naiad.embedded",
    "Tensor": "naiad.tensor",
}


def __getattr__(name: str) -> Any:
    """The in-process API and ``__version__``, looked up on first use: ``import naiad`` stays light for backends."""
    if name == "__version__":
        from importlib.metadata import version

        return version("naiad")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'naiad' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncResponseStream",
    "ErrorCode",
    "NaiadError",
    "Response",
    "ResponseStream",
    "Server",
    "Tensor",
    "__version__",
    "hookimpl",
]
