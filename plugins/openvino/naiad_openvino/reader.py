"""Reading a model file with OpenVINO, and turning OpenVINO exceptions into readable text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from naiad.backend import ErrorCode, NaiadError, invalid_arg, unavailable

_LOCATION = re.compile(r"^(Exception from \S+|Check '.*' failed at \S+)\s*")


def ov_message(error: BaseException) -> str:
    """An OpenVINO exception's message without its C++ source locations, on one line."""
    lines = []
    for line in str(error).splitlines():
        text = _LOCATION.sub("", line).strip()
        if text:
            lines.append(text)
    return " ".join(lines) or type(error).__name__


def read_model(core: Any, model_name: str, path: Path) -> Any:
    """``core.read_model(path)``: IR (``.xml`` + ``.bin``), ONNX or any format OpenVINO reads.

    UNAVAILABLE when the file is missing, INVALID_ARG when OpenVINO cannot read it.
    """
    if not path.exists():
        raise unavailable(
            f"unable to find '{path}' for model '{model_name}': put the model there, or set "
            "default_model_filename in config.pbtxt (model.xml with model.bin, or model.onnx)"
        )
    try:
        return core.read_model(str(path))
    except Exception as error:
        hint = ""
        weights = path.with_suffix(".bin")
        if path.suffix == ".xml" and not weights.exists():
            hint = f"; its weights file '{weights}' is missing"
        raise invalid_arg(f"model '{model_name}': OpenVINO cannot read '{path}'{hint}: {ov_message(error)}") from None


def add_extension(core: Any, model_name: str, library: str) -> None:
    """Load a custom-operation library (``CPU_EXTENSION_PATH``) into ``core``."""
    try:
        core.add_extension(library)
    except Exception as error:
        raise NaiadError(
            f"model '{model_name}': cannot load CPU_EXTENSION_PATH '{library}': {ov_message(error)}",
            ErrorCode.INVALID_ARG,
        ) from None
