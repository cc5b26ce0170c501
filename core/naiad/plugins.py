"""Backend discovery and dispatch.

Backends are found through the entry-point group ``naiad.backends`` (entry name = backend name).
Importing one is cheap by contract (frameworks are imported when a model loads), so the registry
reads every installed backend's :class:`~naiad.backend_info.BackendInfo` and HTTP routes at
startup; a backend is *initialized* when its first model loads and *finalized* when the server
stops. A backend that is missing, fails to import or fails to initialize raises
:class:`BackendUnavailable`, which makes only that backend's models UNAVAILABLE. Backend hooks are
dispatched to exactly one backend (plus naiad's own defaults); server hooks are broadcast to every
registered plugin.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from naiad import defaults, hookspecs
from naiad.backend_info import DEFAULT_BACKENDS, BackendInfo, BackendTable
from naiad.backend_model import BackendModel, ModelInstance
from naiad.backend_sources import missing_backend_hint, reinstall_hint
from naiad.contexts import DEFAULT_MAX_BATCH_SIZE, BackendContext, InstanceContext, ModelLoadContext, SchedulerContext
from naiad.ensemble import ENSEMBLE_BACKEND
from naiad.ensemble import backend as ensemble_backend
from naiad.errors import ErrorCode, NaiadError
from naiad.scheduling.base import Scheduler
from naiad.suggestions import SuggestingError

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from naiad.server_handle import ServerHandle

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "naiad.backends"
DEFAULTS_PLUGIN = "naiad-defaults"
DEFAULT_MAX_BATCH_SIZE_KEY = "default-max-batch-size"
DEFAULT_BACKEND_DIRECTORY = Path("/opt/tritonserver/backends")
"""Triton's ``--backend-directory`` default, where a Triton image keeps python-based backends."""


class BackendUnavailable(SuggestingError):
    """The backend a model names cannot be used; the message says how to fix it.

    ``name`` and ``suggestions``: for a backend that is not installed, its name and the backends it may mean.
    """

    def __init__(self, message: str, *, name: str = "", suggestions: Sequence[str] = ()) -> None:
        super().__init__(message, ErrorCode.UNAVAILABLE, name=name, suggestions=suggestions)


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """``--backend-config`` settings: per backend, and global ones (backend ``""``) for all."""

    settings: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def for_backend(self, name: str) -> dict[str, str]:
        """The backend's settings over the global ones."""
        return {**self.settings.get("", {}), **self.settings.get(name, {})}

    def default_max_batch_size(self, name: str) -> int:
        """``default-max-batch-size`` for a backend (its own, then the global one, then 4)."""
        value = self.for_backend(name).get(DEFAULT_MAX_BATCH_SIZE_KEY)
        if value is None:
            return DEFAULT_MAX_BATCH_SIZE
        try:
            return int(value)
        except ValueError:
            raise NaiadError(
                f"--backend-config {DEFAULT_MAX_BATCH_SIZE_KEY}={value} (backend '{name}') is not an integer",
                ErrorCode.INVALID_ARG,
            ) from None


@dataclass(frozen=True, slots=True)
class Backend:
    """One registered backend; its methods call that backend's hooks and no other plugin's."""

    name: str
    plugin: object
    _manager: pluggy.PluginManager

    def _caller(self, hook_name: str, *, with_defaults: bool = False) -> Any:
        keep = {self.plugin}
        if with_defaults:
            keep.add(self._manager.get_plugin(DEFAULTS_PLUGIN))
        others = [plugin for plugin in self._manager.get_plugins() if plugin not in keep]
        return self._manager.subset_hook_caller(hook_name, remove_plugins=others)

    def info(self) -> BackendInfo | None:
        """The backend's own facts, or None to use Triton's defaults for its name."""
        info = self._caller("naiad_backend_info")()
        if info is not None and not isinstance(info, BackendInfo):
            raise NaiadError(
                f"backend '{self.name}': naiad_backend_info returned {type(info).__name__}, not a BackendInfo",
                ErrorCode.INTERNAL,
            )
        return info

    def initialize(self, context: BackendContext) -> None:
        self._caller("naiad_backend_initialize")(context=context)

    def finalize(self) -> None:
        self._caller("naiad_backend_finalize")()

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

    def create_scheduler(self, model: BackendModel, context: SchedulerContext) -> Scheduler:
        """The backend's scheduler for the model, else naiad's own."""
        scheduler = self._caller("naiad_create_scheduler", with_defaults=True)(model=model, context=context)
        if not isinstance(scheduler, Scheduler):
            raise NaiadError(
                f"backend '{self.name}': naiad_create_scheduler returned {type(scheduler).__name__} for model "
                f"'{context.model_name}', not a naiad.backend.Scheduler",
                ErrorCode.INTERNAL,
            )
        return scheduler


class BackendRegistry:
    """Finds, imports, registers and initializes backends; owns the plugin manager."""

    def __init__(
        self,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
        settings: BackendSettings | None = None,
        backend_directory: Path | None = None,
    ) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.manager.add_hookspecs(hookspecs)
        self.manager.register(defaults, name=DEFAULTS_PLUGIN)
        self.settings = settings or BackendSettings()
        self.backend_directory = backend_directory  # --backend-directory: <name>/ folders of backends not installed
        self._entry_points = entry_points
        self._backends: dict[str, Backend] = {}
        self._failures: dict[str, BackendUnavailable] = {}
        self._initialized: dict[str, Backend] = {}
        self._init_failures: dict[str, BackendUnavailable] = {}
        self._table: BackendTable | None = None
        self._lock = threading.RLock()

    @property
    def hook(self) -> Any:
        """Server hooks, broadcast to every registered plugin."""
        return self.manager.hook

    def register(self, name: str, plugin: ModuleType | object) -> Backend:
        """Register a backend plugin object under a backend name (an in-process plugin)."""
        with self._lock:
            if name in self._backends:
                raise NaiadError(f"backend '{name}' is already registered", ErrorCode.ALREADY_EXISTS)
            self.manager.register(plugin, name=name)
            backend = Backend(name, plugin, self.manager)
            self._backends[name] = backend
            self._table = None
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
                plugin = ensemble_backend if name == ENSEMBLE_BACKEND else self._import(name)
            except BackendUnavailable as error:
                plugin = self._from_directory(name) if error.name else None
                if plugin is None:
                    self._failures[name] = error
                    raise
            self.manager.register(plugin, name=name)
            backend = Backend(name, plugin, self.manager)
            self._backends[name] = backend
            self._table = None
            return backend

    def import_installed(self) -> None:
        """Import every installed backend now; one that fails is logged and its models fail later."""
        for name in sorted({ep.name for ep in self._discover()}):
            try:
                self.get(name)
            except BackendUnavailable as error:
                logger.warning("%s", error.message, extra={"backend": name})

    def table(self) -> BackendTable:
        """Triton's backend table with the registered backends' own infos (cached)."""
        with self._lock:
            if self._table is None:
                infos: list[BackendInfo] = []
                for name, backend in sorted(self._backends.items()):
                    try:
                        info = backend.info()
                    except Exception:
                        logger.exception("backend '%s' failed in naiad_backend_info; using defaults", name)
                        continue
                    if info is not None:
                        if info.name != name:
                            logger.warning(
                                "backend '%s' describes itself as '%s'; using its entry-point name", name, info.name
                            )
                        infos.append(info if info.name == name else replace(info, name=name))
                self._table = DEFAULT_BACKENDS.with_installed(infos)
            return self._table

    def initialized(self, name: str, server: ServerHandle | None) -> Backend:
        """The backend, initialized once (``naiad_backend_initialize``) before its first model loads."""
        backend = self.get(name)
        with self._lock:
            if name in self._initialized:
                return backend
            if name in self._init_failures:
                raise self._init_failures[name]
            context = BackendContext(
                name=name,
                backend_config=self.settings.for_backend(name),
                default_max_batch_size=self.settings.default_max_batch_size(name),
                server=server,  # type: ignore[arg-type]
            )
            try:
                backend.initialize(context)
            except Exception as error:
                failure = BackendUnavailable(
                    f"backend '{name}' failed to initialize: "
                    + (error.message if isinstance(error, NaiadError) else f"{type(error).__name__}: {error}")
                )
                logger.error("%s", failure.message, exc_info=not isinstance(error, NaiadError))
                self._init_failures[name] = failure
                raise failure from error
            self._initialized[name] = backend
            return backend

    def finalize_all(self) -> None:
        """Finalize every initialized backend (their models are unloaded); failures are logged."""
        with self._lock:
            backends, self._initialized = list(self._initialized.values()), {}
        for backend in backends:
            try:
                backend.finalize()
            except Exception:
                logger.exception("backend '%s' failed to finalize", backend.name)

    def http_routes(self, server: ServerHandle) -> list[BaseRoute]:
        """Every registered plugin's extra HTTP routes; routes in KServe's ``/v2`` namespace are refused."""
        routes: list[BaseRoute] = []
        for implementation in self.hook.naiad_http_routes.get_hookimpls():
            plugin = implementation.plugin_name
            try:
                contributed: Sequence[BaseRoute] = implementation.function(server=server)
            except Exception:
                logger.exception("plugin '%s' failed in naiad_http_routes; its routes are not served", plugin)
                continue
            for route in contributed:
                path = str(getattr(route, "path", ""))
                if path == "/v2" or path.startswith(("/v2/", "/metrics")):
                    logger.error(
                        "plugin '%s' offers the route '%s', which is KServe's or naiad's own; it is not served",
                        plugin,
                        path,
                    )
                    continue
                routes.append(route)
        return routes

    def _from_directory(self, name: str) -> object | None:
        """A plugin serving backend ``name`` from ``<backend directory>/<name>``, if an installed plugin
        can (``naiad_backend_from_directory``); None if there is no such folder or none can."""
        if self.backend_directory is None or not (self.backend_directory / name).is_dir():
            return None
        self.import_installed()
        plugin: object | None = self.hook.naiad_backend_from_directory(
            name=name, directory=self.backend_directory / name
        )
        if plugin is not None:
            logger.info("backend '%s' is served from %s", name, self.backend_directory / name, extra={"backend": name})
        return plugin

    def _discover(self) -> list[importlib.metadata.EntryPoint]:
        if self._entry_points is not None:
            return list(self._entry_points)
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))

    def _import(self, name: str) -> object:
        installed = self._discover()
        candidates = [ep for ep in installed if ep.name == name]
        if not candidates:
            platforms = {platform: info.name for info in self.table() for platform in info.platforms}
            hint, suggestions = missing_backend_hint(name, {ep.name for ep in installed}, platforms)
            folder = "" if self.backend_directory is None else f" nor {self.backend_directory / name}/model.py"
            raise BackendUnavailable(
                f"no installed distribution provides backend '{name}' (entry-point group '{ENTRY_POINT_GROUP}')"
                f"{folder}. {hint}",
                name=name,
                suggestions=suggestions,
            )
        if len(candidates) > 1:
            owners = ", ".join(sorted(_distribution_name(ep) for ep in candidates))
            raise BackendUnavailable(
                f"backend '{name}' is provided by several installed distributions ({owners}); uninstall all but one"
            )
        entry_point = candidates[0]
        distribution = _distribution_name(entry_point)
        try:
            return entry_point.load()
        except Exception as error:  # any import failure must stay local to this backend
            raise BackendUnavailable(
                f"backend '{name}' from distribution '{distribution}' failed "
                f"to import ({entry_point.value}): {type(error).__name__}: {error}; "
                f"{reinstall_hint(name, distribution)}"
            ) from error


def _distribution_name(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return dist.metadata["Name"] if dist is not None else "<unknown distribution>"
