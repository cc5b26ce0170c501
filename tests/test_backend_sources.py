"""The hints for a backend that is not installed name only places that were checked."""

from __future__ import annotations

import tomllib
from pathlib import Path

from naiad.backend_sources import PROJECT_PLUGINS, missing_backend_hint, reinstall_hint

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def test_project_plugins_are_the_backends_under_plugins() -> None:
    declared: dict[str, str] = {}
    for pyproject in sorted(PLUGINS.glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        for backend in project.get("entry-points", {}).get("naiad.backends", {}):
            declared[backend] = pyproject.parent.name
    assert declared == dict(PROJECT_PLUGINS)


def test_missing_third_party_backend_names_no_package() -> None:
    hint, suggestions = missing_backend_hint("dali", {"python"}, {"onnxruntime_onnx": "onnxruntime"})
    assert suggestions == ()
    assert hint == (
        "Installed backends: python. Backends that come with naiad are the distributions under plugins/<name> in "
        "its source tree (`pip install ./plugins/<name>` from a checkout); any other backend comes from its author."
    )


def test_missing_project_backend_names_its_folder() -> None:
    hint, suggestions = missing_backend_hint("vllm", set(), {})
    assert suggestions == ()
    assert "'vllm' is one of naiad's own backends" in hint
    assert "`pip install ./plugins/llm`" in hint
    assert "Installed backends: none." in hint


def test_reinstall_hint_names_the_folder_or_the_installed_distribution() -> None:
    assert reinstall_hint("fil", "naiad-fil").endswith("`pip install ./plugins/fil`")
    assert reinstall_hint("custom", "acme-custom") == (
        "reinstall the distribution 'acme-custom' the way it was installed, or ask its author"
    )
