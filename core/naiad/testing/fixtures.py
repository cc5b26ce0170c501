"""pytest fixtures: ``pytest_plugins = ["naiad.testing.fixtures"]`` in a conftest enables them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from naiad.testing.process import ServerProcess, start_server
from naiad.testing.repository import ModelRepositoryBuilder


@pytest.fixture
def model_repository(tmp_path: Path) -> ModelRepositoryBuilder:
    """An empty model repository in a temporary folder."""
    return ModelRepositoryBuilder(tmp_path / "models")


@pytest.fixture
def naiad_server() -> Iterator[Callable[..., ServerProcess]]:
    """Start servers with ``naiad_server(repository_path, *flags)``; all stop at teardown."""
    started: list[ServerProcess] = []

    def start(*repositories: Path, args: tuple[str, ...] = (), **kwargs: object) -> ServerProcess:
        server = start_server(list(repositories), *args, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
