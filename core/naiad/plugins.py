"""Backend discovery and dispatch.

Backends are found through the entry-point group ``naiad.backends`` (entry name = backend
name) and imported only when a model needs them. A backend that is missing or fails to
import raises :class:`BackendUnavailable`, which makes only that backend's models
UNAVAILABLE. Lifecycle hooks are dispatched to exactly one backend; observer hooks are
broadcast to every registered plugin.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pluggy

from naiad import hookspecs
from naiad.backend import BackendModel, InstanceContext, ModelInstance, ModelLoadContext
from naiad.errors import ErrorCode, NaiadError

ENTRY_POINT_GROUP = "naiad.backends"


class BackendUnavailable(NaiadError):
    """The backend a model names cannot be used; the message says how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.UNAVAILABLE)


def distribution_hint(backend: str) -> str:
    """The install command for a backend of this project (``naiad-<backend>``)."""
    return f"pip install naiad-{backend}"


@dataclass(frozen=True, slots=True)
class Backend:
    """One registered backend; its methods call that backend's hooks and no other plugin's."""

    name: str
    plugin: object
    _manager: pluggy.PluginManager

    def _caller(self, hook_name: str) -> Any:
        others = [plugin for plugin in self._manager.get_plugins() if plugin is not self.plugin]
        return self._manager.subset_hook_caller(hook_name, remove_plugins=others)

    def load_model(self, context: ModelLoadContext) -> BackendModel:
        """Call the backend's ``naiad_load_model``."""
        model = self._caller("naiad_load_model")(context=context)
        if model is None:
            raise NaiadError(
                f"backend '{self.name}' does not implement naiad_load_model or returned None "
                f"for model '{context.model_name}'",
                ErrorCode.INTERNAL,
            )
        return model  # type: ignore[no-any-return]

    def create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        """Call the backend's ``naiad_create_instance``."""
        instance = self._caller("naiad_create_instance")(model=model, context=context)
        if instance is None:
            raise NaiadError(
                f"backend '{self.name}' does not implement naiad_create_instance or returned "
                f"None for instance '{context.name}' of model '{context.model_name}'",
                ErrorCode.INTERNAL,
            )
        return instance  # type: ignore[no-any-return]


class BackendRegistry:
    """Finds, imports and registers backends on demand; owns the plugin manager."""

    def __init__(self, entry_points: Iterable[importlib.metadata.EntryPoint] | None = None) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.manager.add_hookspecs(hookspecs)
        self._entry_points = entry_points
        self._backends: dict[str, Backend] = {}
        self._failures: dict[str, BackendUnavailable] = {}
        self._lock = threading.Lock()

    @property
    def hook(self) -> Any:
        """Observer hooks, broadcast to every registered plugin."""
        return self.manager.hook

    def register(self, name: str, plugin: ModuleType | object) -> Backend:
        """Register a backend plugin object under a backend name (used for in-process plugins)."""
        with self._lock:
            if name in self._backends:
                raise NaiadError(f"backend '{name}' is already registered", ErrorCode.ALREADY_EXISTS)
            self.manager.register(plugin, name=name)
            backend = Backend(name, plugin, self.manager)
            self._backends[name] = backend
            return backend

    def installed(self) -> dict[str, str]:
        """Backend name -> providing distribution, for every installed entry point."""
        return {ep.name: _distribution_name(ep) for ep in self._discover()}

    def get(self, name: str) -> Backend:
        """The backend registered under ``name``, importing its plugin on first use."""
        with self._lock:
            if name in self._backends:
                return self._backends[name]
            if name in self._failures:
                raise self._failures[name]
            try:
                plugin = self._import(name)
            except BackendUnavailable as error:
                self._failures[name] = error
                raise
            self.manager.register(plugin, name=name)
            backend = Backend(name, plugin, self.manager)
            self._backends[name] = backend
            return backend

    def _discover(self) -> list[importlib.metadata.EntryPoint]:
        if self._entry_points is not None:
            return list(self._entry_points)
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))

    def _import(self, name: str) -> object:
        candidates = [ep for ep in self._discover() if ep.name == name]
        if not candidates:
            raise BackendUnavailable(
                f"no installed distribution provides backend '{name}' (entry-point group "
                f"'{ENTRY_POINT_GROUP}'); install it with `{distribution_hint(name)}`"
            )
        if len(candidates) > 1:
            owners = ", ".join(sorted(_distribution_name(ep) for ep in candidates))
            raise BackendUnavailable(
                f"backend '{name}' is provided by several installed distributions ({owners}); uninstall all but one"
            )
        entry_point = candidates[0]
        try:
            return entry_point.load()
        except Exception as error:  # any import failure must stay local to this backend
            raise BackendUnavailable(
                f"backend '{name}' from distribution '{_distribution_name(entry_point)}' failed "
                f"to import ({entry_point.value}): {type(error).__name__}: {error}; "
                f"reinstall it with `{distribution_hint(name)}`"
            ) from error


def _distribution_name(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return dist.metadata["Name"] if dist is not None else "<unknown distribution>"
