"""Helpers for testing naiad and naiad backends: repositories, servers on free ports, in-process models.

Backend authors use them from their own test suites::

    from naiad.testing import ModelRepositoryBuilder, load_model, start_server

or enable the pytest fixtures with ``pytest_plugins = ["naiad.testing.fixtures"]`` (registered
automatically when naiad is installed).
"""

from naiad.testing.inprocess import LoadedModel, ResponseCollector, load_model, tensors
from naiad.testing.ports import free_ports
from naiad.testing.process import ServerProcess, start_server
from naiad.testing.repository import ModelRepositoryBuilder, python_identity
from naiad.testing.shared_memory import infer_through_shared_memory
from naiad.testing.threaded import ThreadedServer, serve_in_thread

__all__ = [
    "LoadedModel",
    "ModelRepositoryBuilder",
    "ResponseCollector",
    "ServerProcess",
    "ThreadedServer",
    "free_ports",
    "infer_through_shared_memory",
    "load_model",
    "python_identity",
    "serve_in_thread",
    "start_server",
    "tensors",
]
