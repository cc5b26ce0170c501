"""The set of models a server knows, their versions and states, and lookups by name.

Two views of the same models: the *records* (every version's state and reason, for the index and
the load/unload API, guarded by a lock) and the *serving table* (the READY versions only, an
immutable mapping replaced whole on every change), which the request path reads without a lock.
Models load in dependency order: a model that names others (an ensemble's steps) loads after them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from naiad import config as model_config
from naiad.config.paths import check_model_name, confined_path
from naiad.dependencies import load_waves, model_dependencies
from naiad.errors import ErrorCode, NaiadError, invalid_arg, not_found, unavailable
from naiad.loading import LoadOptions, load_version, release_version
from naiad.models import ModelState, ServingModel, VersionStatus
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.repository import ModelSource, discover_models

if TYPE_CHECKING:
    from naiad.server_handle import ServerHandle

logger = logging.getLogger(__name__)

_LOADER_THREADS = 4


@dataclass(eq=False)
class ModelRecord:
    """A model of the repository: its versions, or the reason none could be attempted."""

    name: str
    source: ModelSource
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    error: str = ""
    backend: str = ""


@dataclass(frozen=True, slots=True)
class ServingVersions:
    """The READY versions of one model, and the one a request without a version gets."""

    latest: ServingModel
    by_version: Mapping[int, ServingModel]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One row of the repository index."""

    name: str
    version: int | None
    state: ModelState | None
    reason: str


@dataclass(slots=True)
class _Plan:
    """A model read from the repository, ready to load (or refused, with ``record.error`` set).

    ``from_request``: the config came with a load request, so the paths it names are client input.
    ``unreadable``: the repository could not even say what the model is (Triton's failed poll).
    """

    record: ModelRecord
    config: ModelConfig | None = None
    versions: list[int] = field(default_factory=list)
    from_request: bool = False
    unreadable: bool = False


class ModelLifecycle:
    """Loads every model of the repositories and answers which version serves a request."""

    def __init__(
        self,
        registry: BackendRegistry,
        repositories: Sequence[Path],
        options: LoadOptions,
        server: ServerHandle | None = None,
    ) -> None:
        self._registry = registry
        self._repositories = list(repositories)
        self.options = options
        self.server = server  # handed to backends in every context
        self._records: dict[str, ModelRecord] = {}
        self._serving: Mapping[str, ServingVersions] = {}
        self._lock = threading.Lock()

    # -- loading -------------------------------------------------------------------------------

    def load_all(self, only: Collection[str] | None = None) -> None:
        """Load the models found in the repositories (those named in ``only``, ``*`` = all).

        Dependencies load first; failures stay local to their model.
        """
        sources = discover_models(self._repositories)
        if only is not None and "*" not in only:
            sources = {name: source for name, source in sources.items() if name in only}
        plans = {name: self._plan(source) for name, source in sources.items()}
        dependencies = {
            name: model_dependencies(plan.config) if plan.config is not None else set() for name, plan in plans.items()
        }
        waves, cycles = load_waves(dependencies)
        for name, cycle in cycles.items():
            plan = plans[name]
            plan.record.error = (
                f"model '{name}' is part of a dependency cycle ({' -> '.join(cycle)}); a model cannot "
                "depend on itself, directly or through other models"
            )
            plan.config = None
            logger.error("%s", plan.record.error, extra={"model": name})
            self.store(plan.record)
        with ThreadPoolExecutor(_LOADER_THREADS, thread_name_prefix="naiad-loader") as pool:
            for wave in waves:
                for record in pool.map(self._load_plan, [plans[name] for name in wave]):
                    self.store(record)

    def _plan(self, source: ModelSource, override: ModelConfig | None = None) -> _Plan:
        record = ModelRecord(source.name, source)
        if source.duplicates:
            places = ", ".join(str(path) for path in (source.path, *source.duplicates))
            record.error = f"model '{source.name}' appears in several model repositories ({places}); keep one"
            logger.error("%s", record.error, extra={"model": source.name})
            return _Plan(record)
        try:
            if override is None:
                config = model_config.read_model_config(source.path, model_name=source.name)
            else:
                config = ModelConfig()
                config.CopyFrom(override)
            check_model_name(config.name, source.name)
        except NaiadError as error:
            record.error = error.message
            logger.error("model '%s' cannot be loaded: %s", source.name, error.message, extra={"model": source.name})
            return _Plan(record, unreadable=True)
        try:
            model_config.detect_backend(config, source.path, self._registry.table())
            if config.default_model_filename:
                confined_path(
                    source.path,
                    config.default_model_filename,
                    "default_model_filename",
                    model=source.name,
                    from_request=False,
                )
            record.backend = config.backend
            if not config.backend and not config.platform:
                raise NaiadError(
                    f"model '{source.name}': config.pbtxt sets neither 'backend' nor 'platform' and no "
                    f'model file identifies one; add e.g. backend: "python" to {source.path / "config.pbtxt"}'
                )
            if not self.options.auto_complete and not (source.path / "config.pbtxt").is_file():
                raise NaiadError(
                    f"model '{source.name}': {source.path / 'config.pbtxt'} is required when "
                    "auto-complete is disabled (--strict-model-config=true)"
                )
            available = model_config.list_version_dirs(source.path)
            chosen, warnings = model_config.select_versions(config.version_policy, available)
        except NaiadError as error:
            record.error = error.message
            logger.error("model '%s' cannot be loaded: %s", source.name, error.message, extra={"model": source.name})
            return _Plan(record)
        for warning in warnings:
            logger.warning("model '%s': %s", source.name, warning, extra={"model": source.name})
        if not chosen:
            record.error = (
                f"model '{source.name}' has no loadable version: no version folder matches its version policy"
            )
            logger.error("%s (folders found: %s)", record.error, available or "none", extra={"model": source.name})
            return _Plan(record)
        return _Plan(record, config, chosen, from_request=override is not None)

    def _load_plan(self, plan: _Plan) -> ModelRecord:
        record = plan.record
        if plan.config is None:
            return record
        for version in plan.versions:
            logger.info(
                "loading model '%s' version %d (backend '%s')",
                record.name,
                version,
                plan.config.backend,
                extra={"model": record.name, "version": version},
            )
            self._notify(VersionStatus(record.name, version))
            status = load_version(
                self._registry,
                record.source.path,
                plan.config,
                version,
                self.options,
                self.server,
                config_from_request=plan.from_request,
            )
            record.versions[version] = status
            self._notify(status)
        return record

    def store(self, record: ModelRecord) -> ModelRecord | None:
        """Make ``record`` the model's record and publish its READY versions; returns the one it replaced."""
        with self._lock:
            previous = self._records.get(record.name)
            self._records[record.name] = record
            self._publish()
        return previous

    def _publish(self) -> None:
        """Rebuild the serving table from the records (lock held); readers see the old or the new one."""
        table: dict[str, ServingVersions] = {}
        for name, record in self._records.items():
            ready = {
                version: status.serving
                for version, status in record.versions.items()
                if status.state is ModelState.READY and status.serving is not None
            }
            if ready:
                table[name] = ServingVersions(ready[max(ready)], ready)
        self._serving = table

    def _notify(self, status: VersionStatus) -> None:
        """Tell observer plugins about a state change; their failures never affect serving."""
        try:
            self._registry.hook.naiad_model_state_changed(
                model_name=status.name, version=status.version, state=status.state.value, reason=status.reason
            )
        except Exception:
            logger.exception(
                "a plugin failed in naiad_model_state_changed for model '%s' version %d",
                status.name,
                status.version,
                extra={"model": status.name, "version": status.version},
            )

    def unload_all(self) -> None:
        """Stop every version, finishing the requests each has accepted."""
        with self._lock:
            versions = [v for record in self._records.values() for v in record.versions.values()]
        for status in versions:
            self._unload_version(status)

    def _unload_version(self, status: VersionStatus) -> None:
        with self._lock:
            serving = status.serving
            if status.state is not ModelState.READY or serving is None:
                return
            status.state = ModelState.UNLOADING
            status.serving = None
            self._publish()
        self._notify(status)
        release_version(serving)
        status.state = ModelState.UNAVAILABLE
        status.reason = "unloaded"
        self._notify(status)

    def unload_model(self, name: str) -> None:
        """Unload every version of one model; it stays in the index as unloaded (no-op if unknown)."""
        with self._lock:
            record = self._records.get(name)
            versions = list(record.versions.values()) if record is not None else []
        for status in versions:
            self._unload_version(status)

    def load_model(self, name: str, config: ModelConfig | None = None) -> None:
        """(Re)load one model, optionally with ``config`` instead of its config.pbtxt.

        Fresh versions (and statistics) replace the old ones once every one of them is READY; when
        any fails, the versions already serving keep serving, as in Triton. Raises with Triton's
        texts when the model is not in any repository or a version fails to load.
        """
        source = discover_models(self._repositories).get(name)
        plan = self._plan(source, config) if source is not None else None
        if plan is None or plan.unreadable:  # Triton's answer; the log says why
            raise NaiadError(f"failed to load '{name}', failed to poll from model repository", ErrorCode.INTERNAL)
        record = self._load_plan(plan)
        failed = [status for _, status in sorted(record.versions.items()) if not status.ready]
        with self._lock:
            previous = self._records.get(name)
        keeps_serving = previous is not None and any(status.ready for status in previous.versions.values())
        if (record.error or failed) and keeps_serving:
            for status in record.versions.values():
                self._unload_version(status)  # the ones that did load
        else:
            self.store(record)
            if previous is not None:
                for status in previous.versions.values():
                    self._unload_version(status)
        if record.error:
            raise invalid_arg(f"load failed for model '{name}': {record.error}")
        if failed:
            reasons = "".join(f"version {v.version} is at UNAVAILABLE state: {v.reason};\n" for v in failed)
            raise invalid_arg(f"load failed for model '{name}': {reasons}")

    # -- queries -------------------------------------------------------------------------------

    def records(self) -> list[ModelRecord]:
        with self._lock:
            return list(self._records.values())

    def serving(self) -> Mapping[str, ServingVersions]:
        """Every READY version by model name (an immutable snapshot)."""
        return self._serving

    def all_ready(self) -> bool:
        """Strict readiness: every version of every model is READY (unloaded ones aside)."""
        for record in self.records():
            if record.error:
                return False
            for status in record.versions.values():
                if status.state is not ModelState.READY and status.reason != "unloaded":
                    return False
        return True

    def index(self, *, include_unloaded: bool = False) -> list[IndexEntry]:
        """One entry per known version; models that never got a version have ``version`` None.

        With ``include_unloaded``, models present in the repositories but never loaded are listed
        too (state None), as the repository-index API does.
        """
        records = {record.name: record for record in self.records()}
        names = set(records)
        if include_unloaded:
            names |= set(discover_models(self._repositories))
        entries: list[IndexEntry] = []
        for name in sorted(names):
            record = records.get(name)
            if record is None:
                entries.append(IndexEntry(name, None, None, ""))
                continue
            if not record.versions:
                entries.append(IndexEntry(name, None, ModelState.UNAVAILABLE, record.error))
            for version, status in sorted(record.versions.items()):
                entries.append(IndexEntry(name, version, status.state, status.reason))
        return entries

    def ready_versions(self, name: str) -> list[ServingModel]:
        """READY versions of a model, ascending; NOT_FOUND if the model is unknown."""
        entry = self._serving.get(name)
        if entry is None:
            self._record(name)  # NOT_FOUND for an unknown model
            return []
        return [model for _, model in sorted(entry.by_version.items())]

    def lookup(self, name: str, version: str | int = "") -> ServingModel:
        """The version that serves a request: the named one, or the highest READY one (no lock)."""
        entry = self._serving.get(name)
        if entry is not None:
            if not version:
                return entry.latest
            model = entry.by_version.get(int(version))
            if model is not None:
                return model
        raise self._lookup_error(name, version)

    def _lookup_error(self, name: str, version: str | int) -> NaiadError:
        """Triton's message for a model or version that cannot serve."""
        try:
            record = self._record(name)
        except NaiadError as error:
            return error
        if not version:
            return not_found(f"Request for unknown model: '{name}' has no available versions")
        if int(version) not in record.versions:
            return not_found(f"Request for unknown model: '{name}' version {int(version)} is not found")
        return unavailable(f"Request for unknown model: '{name}' version {int(version)} is not at ready state")

    def _record(self, name: str) -> ModelRecord:
        with self._lock:
            record = self._records.get(name)
        if record is None or not record.versions:
            raise not_found(f"Request for unknown model: '{name}' is not found")
        return record
