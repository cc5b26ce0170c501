"""The set of models a server knows, their versions and states, and lookups by name."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from naiad import config as model_config
from naiad.errors import ErrorCode, NaiadError, invalid_arg, not_found, unavailable
from naiad.loading import LoadOptions, load_version, release_version
from naiad.models import ModelState, ModelVersion
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.repository import ModelSource, discover_models

logger = logging.getLogger(__name__)

_LOADER_THREADS = 4


@dataclass(eq=False)
class ModelRecord:
    """A model of the repository: its versions, or the reason none could be attempted."""

    name: str
    source: ModelSource
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    error: str = ""
    backend: str = ""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One row of the repository index."""

    name: str
    version: int | None
    state: ModelState | None
    reason: str


class ModelLifecycle:
    """Loads every model of the repositories and answers which version serves a request."""

    def __init__(self, registry: BackendRegistry, repositories: Sequence[Path], options: LoadOptions) -> None:
        self._registry = registry
        self._repositories = list(repositories)
        self._options = options
        self._records: dict[str, ModelRecord] = {}
        self._lock = threading.Lock()

    # -- loading -------------------------------------------------------------------------------

    def load_all(self, only: Collection[str] | None = None) -> None:
        """Load the models found in the repositories (those named in ``only``, ``*`` = all).

        Failures stay local to their model.
        """
        sources = discover_models(self._repositories)
        if only is not None and "*" not in only:
            sources = {name: source for name, source in sources.items() if name in only}
        with ThreadPoolExecutor(_LOADER_THREADS, thread_name_prefix="naiad-loader") as pool:
            for record in pool.map(self._load_model, sources.values()):
                with self._lock:
                    self._records[record.name] = record

    def _load_model(self, source: ModelSource, override: ModelConfig | None = None) -> ModelRecord:
        record = ModelRecord(source.name, source)
        if source.duplicates:
            places = ", ".join(str(path) for path in (source.path, *source.duplicates))
            record.error = f"model '{source.name}' appears in several model repositories ({places}); keep one"
            logger.error("%s", record.error, extra={"model": source.name})
            return record
        try:
            if override is None:
                config = model_config.read_model_config(source.path, model_name=source.name)
            else:
                config = ModelConfig()
                config.CopyFrom(override)
                config.name = config.name or source.name
            model_config.detect_backend(config, source.path)
            record.backend = config.backend
            if not config.backend and not config.platform:
                raise NaiadError(
                    f"model '{source.name}': config.pbtxt sets neither 'backend' nor 'platform' and no "
                    f'model file identifies one; add e.g. backend: "python" to {source.path / "config.pbtxt"}'
                )
            if not self._options.auto_complete and not (source.path / "config.pbtxt").is_file():
                raise NaiadError(
                    f"model '{source.name}': {source.path / 'config.pbtxt'} is required when "
                    "auto-complete is disabled (--strict-model-config=true)"
                )
            available = model_config.list_version_dirs(source.path)
            chosen, warnings = model_config.select_versions(config.version_policy, available)
        except NaiadError as error:
            record.error = error.message
            logger.error("model '%s' cannot be loaded: %s", source.name, error.message, extra={"model": source.name})
            return record
        for warning in warnings:
            logger.warning("model '%s': %s", source.name, warning, extra={"model": source.name})
        if not chosen:
            record.error = (
                f"model '{source.name}' has no loadable version: no version folder matches its version policy"
            )
            logger.error("%s (folders found: %s)", record.error, available or "none", extra={"model": source.name})
            return record
        for version in chosen:
            logger.info(
                "loading model '%s' version %d (backend '%s')",
                source.name,
                version,
                config.backend,
                extra={"model": source.name, "version": version},
            )
            self._notify(ModelVersion(source.name, version))
            loaded = load_version(self._registry, source.path, config, version, self._options)
            record.versions[version] = loaded
            self._notify(loaded)
        return record

    def _notify(self, loaded: ModelVersion) -> None:
        """Tell observer plugins about a state change; their failures never affect serving."""
        try:
            self._registry.hook.naiad_model_state_changed(
                model_name=loaded.name, version=loaded.version, state=loaded.state.value, reason=loaded.reason
            )
        except Exception:
            logger.exception(
                "a plugin failed in naiad_model_state_changed for model '%s' version %d",
                loaded.name,
                loaded.version,
                extra={"model": loaded.name, "version": loaded.version},
            )

    def unload_all(self) -> None:
        """Stop every version, finishing the requests each has accepted."""
        with self._lock:
            versions = [v for record in self._records.values() for v in record.versions.values()]
        for loaded in versions:
            self._unload_version(loaded)

    def _unload_version(self, loaded: ModelVersion) -> None:
        if loaded.state is ModelState.READY:
            loaded.state = ModelState.UNLOADING
            self._notify(loaded)
            release_version(loaded)
            loaded.state = ModelState.UNAVAILABLE
            loaded.reason = "unloaded"
            self._notify(loaded)

    def unload_model(self, name: str) -> None:
        """Unload every version of one model; it stays in the index as unloaded (no-op if unknown)."""
        with self._lock:
            record = self._records.get(name)
            versions = list(record.versions.values()) if record is not None else []
        for loaded in versions:
            self._unload_version(loaded)

    def load_model(self, name: str, config: ModelConfig | None = None) -> None:
        """(Re)load one model, optionally with ``config`` instead of its config.pbtxt.

        Fresh versions (and statistics) replace the old ones. Raises with Triton's texts when the
        model is not in any repository or a version fails to load.
        """
        source = discover_models(self._repositories).get(name)
        if source is None:
            raise NaiadError(f"failed to load '{name}', failed to poll from model repository", ErrorCode.INTERNAL)
        record = self._load_model(source, config)
        with self._lock:
            previous = self._records.get(name)
            self._records[name] = record
        if previous is not None:
            for loaded in previous.versions.values():
                self._unload_version(loaded)
        if record.error:
            raise invalid_arg(f"load failed for model '{name}': {record.error}")
        failed = [loaded for _, loaded in sorted(record.versions.items()) if not loaded.ready]
        if failed:
            reasons = "".join(f"version {v.version} is at UNAVAILABLE state: {v.reason};\n" for v in failed)
            raise invalid_arg(f"load failed for model '{name}': {reasons}")

    # -- queries -------------------------------------------------------------------------------

    def records(self) -> list[ModelRecord]:
        with self._lock:
            return list(self._records.values())

    def all_ready(self) -> bool:
        """Strict readiness: every version of every model is READY (unloaded ones aside)."""
        for record in self.records():
            if record.error:
                return False
            for loaded in record.versions.values():
                if loaded.state is not ModelState.READY and loaded.reason != "unloaded":
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
            for version, loaded in sorted(record.versions.items()):
                entries.append(IndexEntry(name, version, loaded.state, loaded.reason))
        return entries

    def ready_versions(self, name: str) -> list[ModelVersion]:
        """READY versions of a model, ascending; NOT_FOUND if the model is unknown."""
        record = self._record(name)
        return [loaded for _, loaded in sorted(record.versions.items()) if loaded.ready]

    def lookup(self, name: str, version: str = "") -> ModelVersion:
        """The version that serves a request: the named one, or the highest READY one."""
        record = self._record(name)
        if not version:
            ready = [loaded for loaded in record.versions.values() if loaded.ready]
            if not ready:
                raise not_found(f"Request for unknown model: '{name}' has no available versions")
            return max(ready, key=lambda loaded: loaded.version)
        loaded = record.versions.get(int(version))
        if loaded is None:
            raise not_found(f"Request for unknown model: '{name}' version {int(version)} is not found")
        if not loaded.ready:
            raise unavailable(f"Request for unknown model: '{name}' version {int(version)} is not at ready state")
        return loaded

    def _record(self, name: str) -> ModelRecord:
        with self._lock:
            record = self._records.get(name)
        if record is None or not record.versions:
            raise not_found(f"Request for unknown model: '{name}' is not found")
        return record
