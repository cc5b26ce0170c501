"""Finding models in one or more model repository folders."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a model lives; ``duplicates`` lists other repositories holding the same name."""

    name: str
    path: Path
    duplicates: tuple[Path, ...] = ()


def discover_models(repositories: Sequence[Path]) -> dict[str, ModelSource]:
    """Every model folder of every repository, by name, in name order.

    A model is a sub-folder of a repository (hidden folders are skipped). A name found in
    several repositories is returned with its duplicates so the caller can refuse it.
    """
    found: dict[str, list[Path]] = {}
    for repository in repositories:
        if not repository.is_dir():
            raise FileNotFoundError(
                f"model repository '{repository}' does not exist or is not a folder; check --model-repository"
            )
        for entry in sorted(repository.iterdir()):
            if entry.is_dir() and not entry.name.startswith("."):
                found.setdefault(entry.name, []).append(entry)
    return {name: ModelSource(name, paths[0], tuple(paths[1:])) for name, paths in sorted(found.items())}
