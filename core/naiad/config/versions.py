"""Version folders of a model and the version policy that picks among them (model-config.md §4)."""

from __future__ import annotations

import logging
from pathlib import Path

from naiad.protocol.model_config_pb2 import ModelVersionPolicy

__all__ = ["NON_VERSION_DIRS", "list_version_dirs", "select_versions"]

_log = logging.getLogger(__name__)

NON_VERSION_DIRS = frozenset({"configs", "warmup", "initial_state"})
"""Model sub-directories that hold data, never versions."""


def list_version_dirs(model_dir: Path) -> list[int]:
    """The versions present in *model_dir*, ascending: sub-directories named by digits only.

    ``0`` is a version; names with a leading zero (``01``) are skipped with a warning.
    """
    versions: list[int] = []
    try:
        entries = list(model_dir.iterdir())
    except OSError:
        return versions
    for entry in entries:
        name = entry.name
        if name in NON_VERSION_DIRS or not entry.is_dir():
            continue
        if not (name.isascii() and name.isdigit()):
            continue
        if len(name) > 1 and name.startswith("0"):
            _log.warning(
                "model '%s': ignoring folder '%s': version folders must not have leading zeros (use '%s')",
                model_dir.name,
                name,
                name.lstrip("0") or "0",
            )
            continue
        versions.append(int(name))
    return sorted(versions)


def select_versions(policy: ModelVersionPolicy, available: list[int]) -> tuple[list[int], list[str]]:
    """Apply *policy* to the *available* versions.

    Returns the versions to load (ascending) and warnings to log (e.g. a
    ``specific`` version with no folder). An unset policy means ``latest 1``.
    """
    present = sorted(set(available))
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return present, []
    if choice == "specific":
        wanted = sorted(set(policy.specific.versions))
        missing = [v for v in wanted if v not in present]
        warnings = [f"version {v} is listed in the version policy but has no folder" for v in missing]
        return [v for v in wanted if v in present], warnings
    count = policy.latest.num_versions if choice == "latest" else 1
    return (present[-count:] if count > 0 else []), []
