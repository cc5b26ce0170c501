"""naiad: serve Triton model repositories over KServe v2 HTTP and gRPC, with backends as plugins."""

from naiad.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]
