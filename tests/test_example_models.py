"""The plugins' example scripts (``make examples``, run by ``make serve``) write a model only when it is
missing: a model a user has edited is kept as it is."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "plugins").glob("*/examples/make_example.py"))
EDITED = "# my own config, edited by hand\n"


def _model_name(script: Path) -> str:
    """The script's ``MODEL_NAME``, read from its source (importing it would import its framework)."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(target, "id", None) for target in node.targets] == ["MODEL_NAME"]:
            assert isinstance(node.value, ast.Constant)
            return str(node.value.value)
    raise AssertionError(f"{script} names its model folder in MODEL_NAME")


def _run(script: Path, repository: Path) -> str:
    result = subprocess.run([sys.executable, str(script), str(repository)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.parents[1].name)
def test_an_existing_model_is_kept_as_it_is(script: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / _model_name(script)
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(EDITED)

    printed = _run(script, tmp_path)

    assert printed.startswith(f"kept {model_dir}: it is there already"), printed
    assert _files(tmp_path) == {f"{model_dir.name}/config.pbtxt": EDITED.encode()}


def test_a_missing_model_is_written_then_kept(tmp_path: Path) -> None:
    script = ROOT / "plugins" / "onnxruntime" / "examples" / "make_example.py"  # the quickest to generate
    model_dir = tmp_path / _model_name(script)

    assert _run(script, tmp_path).startswith(f"wrote {model_dir}")
    written = _files(model_dir)
    assert sorted(written) == ["1/model.onnx", "config.pbtxt"]
    (model_dir / "config.pbtxt").write_text(EDITED)

    assert _run(script, tmp_path).startswith(f"kept {model_dir}")
    assert _files(model_dir) == {**written, "config.pbtxt": EDITED.encode()}
