"""A read-only description of a configured server, handed to observer hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a plugin may want to know about the server it runs in."""

    name: str
    version: str
    model_repositories: tuple[Path, ...]
    http_port: int | None
    grpc_port: int | None
    metrics_port: int | None
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
