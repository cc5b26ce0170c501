"""Where a FIL model's file is and which serialization it really uses."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from naiad.backend import ModelLoadContext, invalid_arg

_log = logging.getLogger("naiad.fil")

DEFAULT_FILES = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}
FORMAT_NAMES = {
    "xgboost": "an XGBoost legacy binary model",
    "xgboost_json": "an XGBoost JSON model",
    "xgboost_ubj": "an XGBoost UBJSON model",
    "lightgbm": "a LightGBM text model",
    "treelite_checkpoint": "a Treelite checkpoint",
}
# naiad names a config-less model directory '<name>.fil' after the backend and gives it this file name.
_DIRECTORY_RULE_FILENAME = "model.fil"


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A model file and its serialization format (one of ``DEFAULT_FILES``' keys)."""

    model_name: str
    path: Path
    format: str

    @property
    def description(self) -> str:
        return f"{FORMAT_NAMES[self.format]} '{self.path}'"


def locate(context: ModelLoadContext, model_type: str) -> ModelSource:
    """The file for ``model_type``: ``default_model_filename``, or the type's default name.

    Like Triton's FIL backend, a model path that is a directory gets the default file name of
    ``model_type`` appended. An ``xgboost`` (legacy binary) file that actually holds JSON or
    UBJSON — what XGBoost >= 2.1 writes whatever the file name — is read as such, with a warning.
    """
    name = context.config.default_model_filename
    path = context.version_dir / name if name else context.version_dir
    if path.is_dir() or (name == _DIRECTORY_RULE_FILENAME and not path.exists()):
        path = (path if path.is_dir() else context.version_dir) / DEFAULT_FILES[model_type]
    if not path.is_file():
        raise invalid_arg(_missing_file_message(context, model_type, path))
    fmt = model_type
    if model_type == "xgboost":
        fmt = _sniff_xgboost(path)
        if fmt != model_type:
            _log.warning(
                "model '%s': '%s' holds %s, not the legacy binary format model_type 'xgboost' names;"
                " loading it as %s (set model_type '%s' to silence this)",
                context.model_name,
                path,
                "JSON" if fmt == "xgboost_json" else "UBJSON",
                fmt,
                fmt,
            )
    return ModelSource(context.model_name, path, fmt)


def _sniff_xgboost(path: Path) -> str:
    with path.open("rb") as handle:
        head = handle.read(2)
    if head[:1] != b"{":
        return "xgboost"
    return "xgboost_json" if head[1:2] in (b'"', b" ", b"\n", b"\r", b"\t") else "xgboost_ubj"


def _missing_file_message(context: ModelLoadContext, model_type: str, path: Path) -> str:
    try:
        present = sorted(entry.name for entry in context.version_dir.iterdir())
    except OSError:
        present = []
    found = ", ".join(f"'{entry}'" for entry in present) if present else "nothing"
    return (
        f"model '{context.model_name}' version {context.version}: model file '{path}' not found"
        f" (model_type '{model_type}' expects '{DEFAULT_FILES[model_type]}' in the version folder, which holds"
        f" {found}); add the file, or set model_type / default_model_filename in config.pbtxt"
    )
