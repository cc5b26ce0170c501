"""Model folders built from a load request's ``file:`` parameters, outside every model repository.

``POST /v2/repository/models/<m>/load`` (and gRPC ``RepositoryModelLoad``) may carry the whole model:
a ``config`` and files such as ``file:1/model.py``. They are written into a fresh temporary folder,
never into a repository, and the model loads from there; the folder goes when the model is unloaded
or replaced. A file path is client input: absolute paths, ``..`` and anything that would leave the
folder are refused with INVALID_ARG, quoting the parameter and never a server path.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import text_format

from naiad.config.paths import confined_path
from naiad.errors import NaiadError, invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig

logger = logging.getLogger(__name__)

FILE_PREFIX = "file:"


def write_model_folder(name: str, config: ModelConfig | None, files: Mapping[str, bytes]) -> Path:
    """A new temporary folder ``<tmp>/<name>`` holding ``config.pbtxt`` and ``files`` (``file:<path>`` keys).

    Raises INVALID_ARG (and leaves nothing behind) without a ``config`` or for a path that would
    leave the folder.
    """
    if config is None:
        raise invalid_arg("Load parameter 'config' must be specified for model file override")
    root = Path(tempfile.mkdtemp(prefix="naiad-override-"))
    model_dir = root / name
    try:
        model_dir.mkdir()
        (model_dir / "config.pbtxt").write_text(text_format.MessageToString(config))
        for key, content in files.items():
            _write(model_dir, key, content)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return model_dir


def remove_model_folder(model_dir: Path) -> None:
    """Delete a folder :func:`write_model_folder` made (its temporary parent with it)."""
    shutil.rmtree(model_dir.parent, ignore_errors=True)
    logger.debug("removed the override folder of model '%s'", model_dir.name)


def _write(model_dir: Path, key: str, content: bytes) -> None:
    relative = key.removeprefix(FILE_PREFIX)
    try:
        path = confined_path(model_dir, relative, f"file parameter '{key}'", model=model_dir.name, from_request=True)
    except NaiadError:
        raise invalid_arg(
            f"Invalid file parameter '{key}': the path must be relative and stay within the model directory "
            "(not absolute, no '..')"
        ) from None
    if path == model_dir:
        raise invalid_arg(f"Invalid file parameter '{key}': it names the model directory itself, not a file")
    for parent in reversed(path.relative_to(model_dir).parents):
        folder = model_dir / parent
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise invalid_arg(f"Invalid file parameter '{key}', directory has been created as a file")
        folder.mkdir(exist_ok=True)
    if path.is_dir():
        raise invalid_arg(f"Invalid file parameter '{key}': a directory of that name was created by another file")
    path.write_bytes(content)
