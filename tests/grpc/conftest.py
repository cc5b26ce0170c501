"""A naiad server for the gRPC tests: the core repository plus decoupled and slow models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from naiad.testing import ServerProcess, start_server

from .models import add_grpc_models


@pytest.fixture(scope="session")
def grpc_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Models only the gRPC tests use, in a repository of their own."""
    return add_grpc_models(tmp_path_factory.mktemp("grpc") / "models")


@pytest.fixture(scope="session")
def grpc_server(core_repository: Path, grpc_repository: Path) -> Iterator[ServerProcess]:
    """One server over both repositories; tests reach it on ``grpc_url``."""
    server = start_server([core_repository, grpc_repository])
    yield server
    server.stop()
