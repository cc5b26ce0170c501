"""Backend discovery and dispatch rules."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import naiad
from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext
from naiad.errors import NaiadError
from naiad.plugins import ENTRY_POINT_GROUP, BackendRegistry, BackendUnavailable
from naiad.protocol.model_config_pb2 import ModelConfig


def _context(backend: str) -> ModelLoadContext:
    config = ModelConfig(name="m", backend=backend)
    return ModelLoadContext("m", 1, Path("/nowhere/m"), config, auto_complete=True)


class _RecordingBackend:
    """A backend plugin object that records which of its hooks ran."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.calls: list[str] = []
        self.states: list[tuple[str, str]] = []

    @naiad.hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        self.calls.append(f"load {context.model_name}")
        model = BackendModel()
        model.label = self.label  # type: ignore[attr-defined]
        return model

    @naiad.hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        self.calls.append(f"instance {context.name}")
        return ModelInstance()

    @naiad.hookimpl
    def naiad_model_state_changed(self, model_name: str, version: int, state: str, reason: str) -> None:
        self.states.append((model_name, state))


class _EmptyPlugin:
    """A plugin that implements no hook."""


def test_lifecycle_hooks_reach_only_the_named_backend() -> None:
    registry = BackendRegistry(entry_points=[])
    first, second = _RecordingBackend("first"), _RecordingBackend("second")
    registry.register("first", first)
    registry.register("second", second)
    model: Any = registry.get("second").load_model(_context("second"))
    assert model.label == "second"
    assert second.calls == ["load m"]
    assert first.calls == []


def test_observer_hooks_reach_every_plugin() -> None:
    registry = BackendRegistry(entry_points=[])
    first, second = _RecordingBackend("first"), _RecordingBackend("second")
    registry.register("first", first)
    registry.register("second", second)
    registry.hook.naiad_model_state_changed(model_name="m", version=1, state="READY", reason="")
    assert first.states == second.states == [("m", "READY")]


def test_missing_project_backend_points_at_its_folder_in_the_source_tree() -> None:
    registry = BackendRegistry(entry_points=[])
    with pytest.raises(BackendUnavailable) as caught:
        registry.get("onnxruntime")
    message = caught.value.message
    assert "no installed distribution provides backend 'onnxruntime'" in message
    assert "`pip install ./plugins/onnxruntime`" in message
    assert "Installed backends: none." in message
    assert "pip install naiad-" not in message


def test_misspelled_backend_suggests_close_installed_names() -> None:
    entries = [EntryPoint(name, "json", ENTRY_POINT_GROUP) for name in ("scale", "python", "identity")]
    with pytest.raises(BackendUnavailable) as caught:
        BackendRegistry(entry_points=entries).get("scael")
    message = caught.value.message
    assert caught.value.name == "scael"
    assert caught.value.suggestions == ("scale",)
    assert "Did you mean 'scale'?" in message
    assert "Installed backends: identity, python, scale." in message
    assert "any other backend comes from its author" in message
    assert "pip install" not in message.replace("pip install ./plugins/<name>", "")


def test_platform_given_as_backend_suggests_its_backend() -> None:
    with pytest.raises(BackendUnavailable) as caught:
        BackendRegistry(entry_points=[]).get("onnxruntime_onnx")
    assert caught.value.suggestions == ("onnxruntime",)
    assert 'set platform: "onnxruntime_onnx", or backend: "onnxruntime"' in caught.value.message


def test_backend_that_fails_to_import_is_reported_and_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "naiad_broken_backend.py").write_text("import a_module_that_does_not_exist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = EntryPoint("broken", "naiad_broken_backend", ENTRY_POINT_GROUP)
    registry = BackendRegistry(entry_points=[entry])
    for _ in range(2):
        with pytest.raises(BackendUnavailable) as caught:
            registry.get("broken")
        message = caught.value.message
        assert "backend 'broken'" in message
        assert "failed to import" in message
        assert "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'" in message
        assert "reinstall the distribution '<unknown distribution>' the way it was installed" in message
        assert "pip install" not in message
    sys.modules.pop("naiad_broken_backend", None)


def test_backends_are_imported_only_when_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "naiad_lazy_backend.py").write_text("IMPORTED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = BackendRegistry(entry_points=[EntryPoint("lazy", "naiad_lazy_backend", ENTRY_POINT_GROUP)])
    assert "naiad_lazy_backend" not in sys.modules
    assert registry.installed() == {"lazy": "<unknown distribution>"}
    assert "naiad_lazy_backend" not in sys.modules
    registry.get("lazy")
    assert "naiad_lazy_backend" in sys.modules
    sys.modules.pop("naiad_lazy_backend", None)


def test_two_distributions_providing_one_backend_are_refused() -> None:
    entries = [
        EntryPoint("dup", "json", ENTRY_POINT_GROUP),
        EntryPoint("dup", "csv", ENTRY_POINT_GROUP),
    ]
    with pytest.raises(BackendUnavailable, match="provided by several installed distributions"):
        BackendRegistry(entry_points=entries).get("dup")


def test_backend_returning_nothing_is_an_error() -> None:
    registry = BackendRegistry(entry_points=[])
    registry.register("empty", _EmptyPlugin())
    with pytest.raises(NaiadError, match="does not implement naiad_load_model"):
        registry.get("empty").load_model(_context("empty"))


def test_installed_python_backend_is_found_through_its_entry_point() -> None:
    registry = BackendRegistry()
    assert registry.installed()["python"] == "naiad-python"
