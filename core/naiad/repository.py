"""Finding models in one or more model repository folders, and telling when a model folder changed."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a model folder holds, by path, size and modification time: equal fingerprints, same files.

    ``shared`` covers everything outside the version folders (config, labels); ``versions`` each
    numbered version folder's contents, so a poll can tell which versions changed.
    """

    shared: frozenset[tuple[str, int, int]]
    versions: Mapping[int, frozenset[tuple[str, int, int]]]


def fingerprint(model_dir: Path) -> Fingerprint:
    """Stat every file and folder under ``model_dir`` (a symlink counts as its target; linked folders are
    not walked, so a link cycle cannot trap the poller)."""
    shared: set[tuple[str, int, int]] = set()
    versions: dict[int, set[tuple[str, int, int]]] = {}
    for folder, dirs, files in os.walk(model_dir):
        dirs.sort()
        relative_folder = Path(folder).relative_to(model_dir)
        for entry in (*dirs, *files):
            relative = relative_folder / entry
            try:
                stat = (model_dir / relative).stat()
            except OSError:  # removed while we looked: the next poll sees the rest
                continue
            top = relative.parts[0]
            bucket = versions.setdefault(int(top), set()) if top.isdigit() else shared
            bucket.add((relative.as_posix(), stat.st_size, stat.st_mtime_ns))
    return Fingerprint(frozenset(shared), {version: frozenset(items) for version, items in versions.items()})
