"""Helpers for testing naiad and naiad backends: repositories, servers on free ports.

Backend authors use them from their own test suites::

    from naiad.testing import ModelRepositoryBuilder, start_server

or enable the pytest fixtures with ``pytest_plugins = ["naiad.testing.fixtures"]``.
"""

from naiad.testing.ports import free_ports
from naiad.testing.process import ServerProcess, start_server
from naiad.testing.repository import ModelRepositoryBuilder

__all__ = ["ModelRepositoryBuilder", "ServerProcess", "free_ports", "start_server"]
