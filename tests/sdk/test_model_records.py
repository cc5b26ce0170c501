"""Model records: dependency-ordered loading, immutable serving records and the lock-free lookup."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from naiad.dependencies import load_waves, model_dependencies
from naiad.lifecycle import ModelLifecycle
from naiad.loading import LoadOptions
from naiad.models import ModelState
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.testing import ModelRepositoryBuilder

from .backends import IDENTITY_CONFIG


def test_models_load_in_waves_after_what_they_need() -> None:
    waves, cycles = load_waves({"ens": {"pre", "net"}, "net": set(), "pre": {"net"}, "solo": {"elsewhere"}})
    assert waves == [["net", "solo"], ["pre"], ["ens"]]
    assert cycles == {}


def test_cycles_are_reported_with_their_path_and_dependents_load_last() -> None:
    waves, cycles = load_waves({"a": {"b"}, "b": {"a"}, "c": {"a"}, "d": set(), "self": {"self"}})
    assert cycles == {"a": ["a", "b", "a"], "b": ["b", "a", "b"], "self": ["self", "self"]}
    assert waves == [["d"], ["c"]]


def test_an_ensemble_needs_its_steps() -> None:
    config = ModelConfig(platform="ensemble")
    for name in ("pre", "net", "pre"):
        config.ensemble_scheduling.step.add(model_name=name)
    assert model_dependencies(config) == {"pre", "net"}


def _lifecycle(tmp_path: Path) -> ModelLifecycle:
    repository = ModelRepositoryBuilder(tmp_path / "models")
    for name in ("a", "b"):
        repository.add_model(name, IDENTITY_CONFIG.format(extra=""), {"1/.keep": "", "2/.keep": ""})
    policy = "version_policy { all { } }"
    repository.add_model("c", IDENTITY_CONFIG.format(extra=policy), {"1/.keep": "", "3/.keep": ""})
    cycle = 'platform: "ensemble" ensemble_scheduling {{ step [ {{ model_name: "{other}" }} ] }}'
    repository.add_model("ring1", cycle.format(other="ring2"), {"1/.keep": ""})
    repository.add_model("ring2", cycle.format(other="ring1"), {"1/.keep": ""})
    return ModelLifecycle(BackendRegistry(), [repository.root], LoadOptions())


def test_models_on_a_dependency_cycle_fail_with_the_cycle_named(tmp_path: Path) -> None:
    lifecycle = _lifecycle(tmp_path)
    lifecycle.load_all()
    try:
        reasons = {entry.name: entry.reason for entry in lifecycle.index() if entry.name.startswith("ring")}
        assert reasons == {
            "ring1": "circular dependency between ensembles: ring1 -> ... -> ring2 -> ring1",
            "ring2": "circular dependency between ensembles: ring2 -> ... -> ring1 -> ring2",
        }
    finally:
        lifecycle.unload_all()


def test_the_serving_table_holds_ready_versions_and_lookups_take_no_lock(tmp_path: Path) -> None:
    lifecycle = _lifecycle(tmp_path)
    lifecycle.load_all()
    try:
        serving = lifecycle.serving()
        assert sorted(serving) == ["a", "b", "c"]
        assert sorted(serving["c"].by_version) == [1, 3]
        assert serving["c"].latest.version == 3
        held = threading.Event()
        release = threading.Event()

        def hold_the_lock() -> None:
            with lifecycle._lock:
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        try:
            assert held.wait(5)
            # Loading and unloading wait for the lock; serving a request does not.
            assert lifecycle.lookup("c").version == 3
            assert lifecycle.lookup("c", "1").version == 1
            assert lifecycle.lookup("a", 2).name == "a"
        finally:
            release.set()
            holder.join()
        lifecycle.unload_model("c")
        assert "c" not in lifecycle.serving()
        assert {entry.state for entry in lifecycle.index() if entry.name == "c"} == {ModelState.UNAVAILABLE}
        with pytest.raises(Exception, match=r"'c' version 3 is not at ready state"):
            lifecycle.lookup("c", "3")
        assert serving["c"].latest.version == 3  # a snapshot taken earlier never changes
    finally:
        lifecycle.unload_all()


def test_a_serving_record_cannot_be_changed(tmp_path: Path) -> None:
    lifecycle = _lifecycle(tmp_path)
    lifecycle.load_all(only={"a"})
    try:
        model = lifecycle.lookup("a")
        with pytest.raises(AttributeError):
            model.version = 7  # type: ignore[misc]
    finally:
        lifecycle.unload_all()
