"""Building model repositories on disk for tests."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path


def python_identity(output: str) -> str:
    """The ``model.py`` of a python-backend model that answers each request's first input as ``output``."""
    return f"""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor({output!r}, r.inputs()[0].as_numpy())]) for r in requests]
"""


class ModelRepositoryBuilder:
    """Writes models into a repository folder: ``config.pbtxt`` plus files per version."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def add_model(
        self,
        name: str,
        config: str | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> Path:
        """Create ``<root>/<name>``; ``files`` maps paths inside the model folder to contents.

        ``config`` is written as ``config.pbtxt`` (dedented) unless it is None.
        """
        model_dir = self.root / name
        model_dir.mkdir(parents=True, exist_ok=True)
        if config is not None:
            (model_dir / "config.pbtxt").write_text(textwrap.dedent(config))
        for relative, content in (files or {}).items():
            path = model_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content))
        return model_dir

    def add_python_model(
        self, name: str, source: str, config: str | None = None, versions: Iterable[int] = (1,)
    ) -> Path:
        """A python-backend model: ``source`` becomes ``<version>/model.py`` for each version."""
        return self.add_model(name, config, {f"{version}/model.py": source for version in versions})
