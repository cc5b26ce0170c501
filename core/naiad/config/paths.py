"""Paths a model config names (model files, label files, backend parameters) stay in the model's folder.

A config may come from a load request (``POST /v2/repository/models/<m>/load`` with a ``config``), so
whatever path it names is client input: ``default_model_filename: "../../uploads/evil.py"`` must not
make the server import a file from elsewhere. Every such path is relative, has no ``..`` and, for a
config from a load request, still lies inside the model's folder once symlinks are resolved (a
symlink the operator put in the repository is trusted for configs read from the repository).
Refusals name what the config said, never a server path.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from naiad.errors import invalid_arg


def confined_path(
    model_dir: Path, relative: str, what: str, *, model: str, from_request: bool, base: Path | None = None
) -> Path:
    """``base / relative`` (``base`` defaults to ``model_dir``), or INVALID_ARG when it would leave the
    model's folder. ``what`` names the setting in the message (e.g. ``default_model_filename``).
    """
    pure = PurePosixPath(relative)
    if not relative or pure.is_absolute() or ".." in pure.parts or "\\" in relative or "\0" in relative:
        raise invalid_arg(
            f"model '{model}': {what} '{relative}' must be a relative path inside the model's folder "
            "(not absolute, no '..')"
        )
    path = (base or model_dir).joinpath(*pure.parts)
    if from_request and not path.resolve().is_relative_to(model_dir.resolve()):
        raise invalid_arg(f"model '{model}': {what} '{relative}' leads outside the model's folder")
    return path


def check_model_name(config_name: str, directory_name: str) -> None:
    """Triton's rule: a model's name is its directory's name."""
    if config_name and config_name != directory_name:
        raise invalid_arg(
            f"unexpected directory name '{directory_name}' for model '{config_name}', directory name must equal "
            "model name"
        )
