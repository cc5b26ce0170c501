"""naiad: serve Triton model repositories over KServe v2 HTTP and gRPC, with backends as plugins.

The public API is :mod:`naiad.backend` (everything a backend uses), :mod:`naiad.testing` (test
helpers) and :data:`hookimpl`. Every other module is internal and may change without notice.
"""

from naiad.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]
