"""Finding 5: control APIs that anyone on the network may call are named in a warning at startup."""

from __future__ import annotations

from pathlib import Path

import pytest

from naiad.testing import start_server


def _startup_log(repository: Path, *args: str) -> str:
    server = start_server([repository], "--model-control-mode=explicit", *args)
    try:
        return server.logs()
    finally:
        assert server.stop() == 0


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return tmp_path


def test_open_control_apis_on_every_address_are_named(repository: Path) -> None:
    log = _startup_log(repository, "--http-address=0.0.0.0", "--grpc-address=0.0.0.0")
    assert "HTTP listens on 0.0.0.0 and anyone who reaches it may call logging, model-repository" in log
    assert "--http-restricted-api=logging,model-repository:<header>=<value>" in log
    assert "gRPC listens on 0.0.0.0 and anyone who reaches it may call logging, model-repository" in log
    assert "--grpc-restricted-protocol=logging,model-repository:<header>=<value>" in log


def test_restricted_control_apis_are_not_named(repository: Path) -> None:
    log = _startup_log(
        repository,
        "--http-address=0.0.0.0",
        "--grpc-address=0.0.0.0",
        "--http-restricted-api=model-repository,logging:admin-key=secret",
        "--grpc-restricted-protocol=model-repository,logging:admin-key=secret",
    )
    assert "anyone who reaches it" not in log


def test_loopback_listeners_are_not_named(repository: Path) -> None:
    assert "anyone who reaches it" not in _startup_log(repository)
