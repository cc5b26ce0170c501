"""naiad as people install it: one version for every distribution, editable installs (``make setup``)
that setuptools has nothing to warn about, and the core and a plugin built into wheels (as ``make dist``
builds them), installed (not editable) into a clean virtual environment and serving a model."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import build
import numpy as np
import pytest
import tritonclient.http as httpclient
from packaging.requirements import Requirement

import naiad
from naiad.testing import ModelRepositoryBuilder, start_server

ROOT = Path(__file__).resolve().parent.parent
VERSION = (ROOT / "VERSION").read_text().strip()
PLUGINS = sorted(path.parent for path in (ROOT / "plugins").glob("*/pyproject.toml"))
PROJECTS = [ROOT, *PLUGINS]

ADD_ONE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + 1)])
            for r in requests
        ]
"""
ADD_ONE_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


def _pyproject(project: Path) -> dict[str, Any]:
    with (project / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def _label(project: Path) -> str:
    return "naiad" if project == ROOT else project.name


@pytest.mark.parametrize("project", PROJECTS, ids=_label)
def test_every_distribution_takes_its_version_from_the_version_file(project: Path) -> None:
    config = _pyproject(project)
    where = project / "pyproject.toml"
    assert "version" not in config["project"], f"{where}: drop `version`; it comes from VERSION"
    assert "version" in config["project"].get("dynamic", []), f'{where}: add `dynamic = ["version"]`'
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"file": "VERSION"}, (
        f'{where}: add `[tool.setuptools.dynamic] version = {{file = "VERSION"}}`'
    )
    assert (project / "VERSION").resolve() == ROOT / "VERSION", (
        f"{project / 'VERSION'} must link to the repository's: ln -s ../../VERSION {project / 'VERSION'}"
    )


@pytest.mark.parametrize("plugin", PLUGINS, ids=_label)
def test_every_plugin_requires_the_naiad_of_its_version(plugin: Path) -> None:
    requirements = [Requirement(text) for text in _pyproject(plugin)["project"]["dependencies"]]
    (naiad_requirement,) = [requirement for requirement in requirements if requirement.name == "naiad"]
    assert str(naiad_requirement.specifier) == f">={VERSION}", (
        f"{plugin / 'pyproject.toml'}: require naiad>={VERSION}, the version in VERSION"
    )


def test_the_installed_distributions_report_the_version() -> None:
    names = ["naiad", *(_pyproject(plugin)["project"]["name"] for plugin in PLUGINS)]
    installed = {name: importlib.metadata.version(name) for name in names}
    assert installed == dict.fromkeys(names, VERSION), "the environment is older than VERSION: run `make setup`"
    assert naiad.__version__ == VERSION


@pytest.mark.parametrize("project", PROJECTS, ids=_label)
def test_an_editable_install_builds_without_warnings(project: Path, tmp_path: Path) -> None:
    """What ``make setup`` has setuptools do for each distribution, in this environment, with its output kept."""
    output: list[str] = []

    def run(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        result = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(extra_environ or {})}, capture_output=True)
        output.append(result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace"))
        result.check_returncode()

    build.ProjectBuilder(project, runner=run).build("editable", tmp_path)
    warnings = re.findall(r"^.*\w+Warning: .*$", "".join(output), flags=re.MULTILINE)
    assert not warnings, f"{project / 'pyproject.toml'}: setuptools warns at install:\n" + "\n".join(output)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The core's and the python plugin's wheels (and sdists), built as ``make dist`` builds them."""
    outdir = tmp_path_factory.mktemp("dist")
    script = ROOT / "scripts" / "build_distributions.py"
    command = [sys.executable, str(script), "--outdir", str(outdir), str(ROOT), str(ROOT / "plugins" / "python")]
    built = subprocess.run(command, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    assert sorted(path.name for path in outdir.iterdir()) == [
        f"naiad-{VERSION}-py3-none-any.whl",
        f"naiad-{VERSION}.tar.gz",
        f"naiad_python-{VERSION}-py3-none-any.whl",
        f"naiad_python-{VERSION}.tar.gz",
    ]
    return sorted(outdir.glob("*.whl"))


def test_a_failed_build_names_its_folder_and_shows_its_log(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "pyproject.toml").write_text('[project]\nname = "broken"\ndependencies = [\n')
    command = [sys.executable, str(ROOT / "scripts" / "build_distributions.py"), "--outdir", str(tmp_path / "dist")]
    result = subprocess.run([*command, str(tmp_path / "broken")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith(f"building {tmp_path / 'broken'} failed (exit 1); its log:\n")
    assert "Failed to parse" in result.stderr


def test_the_wheels_install_into_a_clean_venv_and_serve(wheels: list[Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # This environment's pip installs into the new one: the wheels with their dependencies, from the index.
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    install = [*pip, "install", "--quiet", "--no-compile", *map(str, wheels)]
    installed = subprocess.run(install, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    where = subprocess.run(
        [python, "-c", "import naiad, naiad_python; print(naiad.__file__); print(naiad_python.__file__)"],
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr
    assert all(Path(line).is_relative_to(venv) for line in where.stdout.splitlines()), where.stdout

    repository = ModelRepositoryBuilder(tmp_path / "models")
    repository.add_model("add_one", ADD_ONE_CONFIG, {"1/model.py": ADD_ONE})
    server = start_server([repository.root], env={"PYTHONPATH": ""}, program=[str(venv / "bin" / "naiad")])
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.get_server_metadata()["version"] == VERSION
        tensor = httpclient.InferInput("X", [3], "FP32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
        np.testing.assert_array_equal(client.infer("add_one", [tensor]).as_numpy("Y"), [2, 3, 4])
        client.close()
    finally:
        server.stop()
