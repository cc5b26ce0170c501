"""The images install every plugin of this tree with extras that exist, from files the build context
has. (Building them needs Docker and the network; docs/deploy.md says how.)"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from .manifests import DEPLOY, DOCKERFILES, ROOT, dockerfile_plugins, label

PLUGINS = {path.parent.name: path for path in (ROOT / "plugins").glob("*/pyproject.toml")}
# Plugins that only run on NVIDIA GPUs: in the CUDA image only.
GPU_ONLY = {"tensorrt"}
CPU_IMAGE, CUDA_IMAGE = DEPLOY / "Dockerfile", DEPLOY / "Dockerfile.cuda"


def _extras(pyproject: Path) -> set[str]:
    return set(tomllib.loads(pyproject.read_text())["project"].get("optional-dependencies", {}))


def test_cpu_image_installs_every_plugin_but_the_gpu_only_ones() -> None:
    assert PLUGINS.keys() >= GPU_ONLY
    assert set(dockerfile_plugins(CPU_IMAGE)) == PLUGINS.keys() - GPU_ONLY


def test_cuda_image_installs_every_plugin_and_the_core_with_cuda() -> None:
    assert set(dockerfile_plugins(CUDA_IMAGE)) == PLUGINS.keys()
    assert '".[cuda]"' in CUDA_IMAGE.read_text()
    assert "cuda" in _extras(ROOT / "pyproject.toml")


@pytest.mark.parametrize("path", DOCKERFILES, ids=label)
def test_every_extra_asked_for_exists(path: Path) -> None:
    for plugin, extras in dockerfile_plugins(path).items():
        assert extras <= _extras(PLUGINS[plugin]), f"{label(path)}: plugins/{plugin} has no extra {extras}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=label)
def test_copied_files_exist_and_reach_the_build_context(path: Path) -> None:
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied = [
        source
        for match in re.finditer(r"^COPY (?!--from)(.+) \S+$", path.read_text(), re.MULTILINE)
        for source in match[1].split()
    ]
    assert {"core", "plugins", "pyproject.toml"} <= set(copied)
    for source in copied:
        assert (ROOT / source).exists(), f"{label(path)} copies {source}, which is not in the repository"
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), f".dockerignore leaves out {source}"
