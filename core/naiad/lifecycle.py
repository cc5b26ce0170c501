"""The set of models a server knows, their versions and states, and lookups by name.

Two views of the same models: the *records* (every version's state and reason, for the index and
the load/unload API, guarded by a lock) and the *serving table* (the READY versions only, an
immutable mapping replaced whole on every change), which the request path reads without a lock.
Models load in dependency order: a model that names others (an ensemble's steps) loads after them.
A reload is a swap: the fresh versions load beside the serving ones and replace them in one step.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from naiad import config as model_config
from naiad.config.normalize import ENSEMBLE_PLATFORM
from naiad.config.paths import check_model_name, confined_path
from naiad.config.repository_agents import run_load_agents
from naiad.dependencies import load_waves, model_dependencies
from naiad.errors import ErrorCode, NaiadError, invalid_arg, not_found, unavailable
from naiad.loading import LoadOptions, load_version, release_version
from naiad.models import ModelState, ServingModel, VersionStatus
from naiad.overrides import remove_model_folder, write_model_folder
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.repository import ModelSource, discover_models

if TYPE_CHECKING:
    from naiad.server_handle import ServerHandle

logger = logging.getLogger(__name__)

DEFAULT_LOAD_THREADS = 4  # Triton's --model-load-thread-count
DEFAULT_UNLOAD_TIMEOUT = 30.0  # --model-unload-timeout-secs


@dataclass(eq=False)
class ModelRecord:
    """A model of the repository: its versions, or the reason none could be attempted.

    ``needs``: the models it depends on (an ensemble's steps); ``override_dir``: the temporary folder
    a load with ``file:`` parameters made, removed when the record is unloaded or replaced.
    """

    name: str
    source: ModelSource
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    error: str = ""
    backend: str = ""
    needs: frozenset[str] = frozenset()
    override_dir: Path | None = None


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
    clash: bool = False  # the name is in several repositories: Triton lists it UNAVAILABLE without a version


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

    @property
    def needs(self) -> frozenset[str]:
        return self.record.needs


class ModelLifecycle:
    """Loads, reloads and unloads the models of the repositories and answers which version serves a request.

    One model changes at a time (a lock per model); different models load in parallel, up to
    ``load_threads`` at once. A reload swaps the fresh versions in only once they are READY, and
    the versions they replace finish the requests they accepted (``unload_timeout`` seconds at
    most before the unload call returns and they finish in the background).
    """

    def __init__(
        self,
        registry: BackendRegistry,
        repositories: Sequence[Path],
        options: LoadOptions,
        server: ServerHandle | None = None,
        *,
        load_threads: int = DEFAULT_LOAD_THREADS,
        unload_timeout: float = DEFAULT_UNLOAD_TIMEOUT,
    ) -> None:
        self._registry = registry
        self._repositories = list(repositories)
        self.options = options
        self.server = server  # handed to backends in every context
        self._load_threads = load_threads
        self._unload_timeout = unload_timeout
        self._records: dict[str, ModelRecord] = {}
        self._serving: Mapping[str, ServingVersions] = {}
        self._lock = threading.Lock()
        self._model_locks: dict[str, threading.Lock] = {}
        # model -> the models unloaded along with it (they needed it); they load again when it does
        self._taken_along: dict[str, set[str]] = {}
        # models serving because a load named them (not only as another's need): unload_dependents keeps them
        self._named_loads: set[str] = set()

    # -- loading -------------------------------------------------------------------------------

    def discover(self) -> dict[str, ModelSource]:
        """Every model folder of the repositories, by name."""
        return discover_models(self._repositories)

    def load_all(self, only: Collection[str] | None = None) -> None:
        """Load the models found in the repositories (those named in ``only`` and what they need; ``*`` = all)."""
        sources = self.discover()
        named = set(sources)
        if only is not None and "*" not in only:
            named &= set(only)
            sources = {name: sources[name] for name in self._with_needs(only, sources)}
        self.load_models(sources)
        self._mark_named(named)

    def _mark_named(self, names: Collection[str]) -> None:
        """Remember which of ``names`` serve because a load named them."""
        with self._lock:
            self._named_loads.update(name for name in names if name in self._serving)

    def load_models(
        self, sources: Mapping[str, ModelSource], reuse: Mapping[str, Collection[int]] | None = None
    ) -> None:
        """(Re)load ``sources`` in dependency order, independent ones in parallel.

        ``reuse`` names, per model, versions whose files did not change: a READY one keeps serving
        as it is when its model's config did not change either. Failures stay local to their model;
        a model that fails keeps the versions it was serving.
        """
        reuse = reuse or {}
        plans = {name: self._plan(source) for name, source in sources.items()}
        dependencies = {name: plan.needs for name, plan in plans.items()}
        waves, cycles = load_waves(dependencies)
        for name, cycle in cycles.items():
            plan = plans[name]
            plan.record.error = (  # Triton's words; the path is start -> ... -> last hop -> start
                f"circular dependency between ensembles: {cycle[0]} -> ... -> {cycle[-2]} -> {cycle[0]}"
            )
            plan.config = None
            logger.error("%s", plan.record.error, extra={"model": name})
            self._install(plan)
        with ThreadPoolExecutor(self._load_threads, thread_name_prefix="naiad-loader") as pool:
            for wave in waves:
                batch = [plans[name] for name in wave]
                list(pool.map(self._install, batch, [reuse.get(name, ()) for name in wave]))
        for name in sorted(sources):
            if name in self._serving:
                self._bring_back(name)

    def _with_needs(self, names: Collection[str], sources: Mapping[str, ModelSource]) -> set[str]:
        """``names`` (those in the repositories) and every model they need, directly or not."""
        wanted: set[str] = set()
        pending = [name for name in names if name in sources]
        while pending:
            name = pending.pop()
            if name in wanted:
                continue
            wanted.add(name)
            try:
                config = model_config.read_model_config(
                    sources[name].path, model_name=name, config_name=self.options.config_name
                )
            except NaiadError:
                continue  # it fails on its own terms when loaded
            pending.extend(need for need in model_dependencies(config) if need in sources)
        return wanted

    def _plan(self, source: ModelSource, override: ModelConfig | None = None) -> _Plan:
        record = ModelRecord(source.name, source)
        if source.duplicates:  # Triton cannot poll it: a load request is answered so
            return _refused(record, NaiadError(_clash(source)), unreadable=True)
        try:
            if override is None:
                config = model_config.read_model_config(
                    source.path, model_name=source.name, config_name=self.options.config_name
                )
            else:
                config = ModelConfig()
                config.CopyFrom(override)
            check_model_name(config.name, source.name)
        except NaiadError as error:
            return _refused(record, error, unreadable=True)
        record.needs = frozenset(model_dependencies(config))
        try:
            run_load_agents(config, source.path, source.name)
        except NaiadError as error:  # as in Triton, the model cannot even be polled
            return _refused(record, error, unreadable=True)
        try:
            model_config.detect_backend(config, source.path, self._registry.table())
        except NaiadError as error:  # Triton cannot read such a model when it polls either
            return _refused(record, error, unreadable=True)
        try:
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
            if not self.options.auto_complete and not model_config.config_path(source.path, self.options.config_name):
                raise NaiadError(
                    f"model '{source.name}': {source.path / 'config.pbtxt'} is required when "
                    "auto-complete is disabled (--strict-model-config=true)"
                )
            available = model_config.list_version_dirs(source.path)
            chosen, warnings = model_config.select_versions(config.version_policy, available)
        except NaiadError as error:
            return _refused(record, error, unreadable=False)
        for warning in warnings:
            logger.warning("model '%s': %s", source.name, warning, extra={"model": source.name})
        if not chosen:
            record.error = no_version_error(source.name)
            logger.error(
                "failed to load model '%s': %s; no version folder matches it (folders found: %s)",
                source.name,
                record.error,
                available or "none",
                extra={"model": source.name},
            )
            return _Plan(record)
        return _Plan(record, config, chosen, from_request=override is not None)

    def _load_plan(self, plan: _Plan, versions: Collection[int]) -> dict[int, VersionStatus]:
        """Load ``versions`` of the plan's model, one after another; their statuses, READY or not."""
        assert plan.config is not None
        loaded: dict[int, VersionStatus] = {}
        for version in versions:
            logger.info(
                "loading model '%s' version %d (backend '%s')",
                plan.record.name,
                version,
                plan.config.backend or plan.config.platform,
                extra={"model": plan.record.name, "version": version},
            )
            self._notify(VersionStatus(plan.record.name, version))
            began = time.monotonic()
            status = self._load_version(plan, version)
            for retry in range(1, self.options.load_retries + 1):
                if status.ready:
                    break
                logger.warning(
                    "loading model '%s' version %d again (retry %d of %d, --model-load-retry-count)",
                    plan.record.name,
                    version,
                    retry,
                    self.options.load_retries,
                    extra={"model": plan.record.name, "version": version},
                )
                status = self._load_version(plan, version)
            if status.ready:
                logger.info(
                    "successfully loaded '%s' version %d (%.1f s)",
                    plan.record.name,
                    version,
                    time.monotonic() - began,
                    extra={"model": plan.record.name, "version": version},
                )
            loaded[version] = status
            self._notify(status)
        return loaded

    def _load_version(self, plan: _Plan, version: int) -> VersionStatus:
        assert plan.config is not None
        return load_version(
            self._registry,
            plan.record.source.path,
            plan.config,
            version,
            self.options,
            self.server,
            config_from_request=plan.from_request,
        )

    def _install(self, plan: _Plan, reuse: Collection[int] = ()) -> None:
        """Load the plan's versions and swap them in for the model's current ones once all are READY.

        A model loads all its versions or none, as in Triton: when any fails, the new versions that
        loaded are unloaded, and the old versions keep serving if the model was serving.
        """
        record = plan.record
        with self._model_lock(record.name):
            with self._lock:
                previous = self._records.get(record.name)
            old = previous.versions if previous is not None else {}
            kept = {
                version: old[version]
                for version in reuse
                if version in plan.versions and version in old and old[version].ready
            }
            fresh: dict[int, VersionStatus] = {}
            if plan.config is not None:
                if not any(status.ready for status in old.values()):  # nothing serves meanwhile: show LOADING
                    loading = {version: VersionStatus(record.name, version) for version in plan.versions}
                    self.store(dataclasses.replace(record, versions=loading))
                fresh = self._load_plan(plan, [v for v in plan.versions if v not in kept])
            record.versions = {**kept, **fresh}
            failed = bool(record.error) or any(not status.ready for status in fresh.values())
            if failed and previous is not None and any(status.ready for status in old.values()):
                logger.warning(
                    "model '%s' keeps serving its previous versions because the new ones failed to load; "
                    "fix the model and load it again",
                    record.name,
                    extra={"model": record.name},
                )
                for status in fresh.values():
                    self._unload_version(status)
                _drop_override(record)
                # the versions that failed are listed with their reason, as in Triton
                failures = {v: status for v, status in fresh.items() if v not in old and status.failure is not None}
                if failures:
                    self.store(dataclasses.replace(previous, versions=dict(sorted({**old, **failures}.items()))))
                return
            if failed:
                self._unload_loaded(record.name, fresh)
            else:
                _continue_counters(old, fresh)
            # Versions the model no longer has stay listed while they unload, then as unloaded.
            gone = {v: s for v, s in old.items() if v not in record.versions and (s.ready or s.reason == "unloaded")}
            record.versions = dict(sorted({**gone, **record.versions}.items()))
            self.store(record)
            if previous is not None:
                self._retire(previous, record, kept)

    def _unload_loaded(self, name: str, fresh: Mapping[int, VersionStatus]) -> None:
        """Unload the versions of a failed load that did load; they show as UNAVAILABLE "unloaded"."""
        loaded = [status for status in fresh.values() if status.ready]
        if not loaded:
            return
        logger.warning(
            "model '%s' failed to load, so version%s %s, which loaded, %s unloaded: a model serves all the "
            "versions its version policy selects or none; fix the failed version and load the model again",
            name,
            "s" if len(loaded) > 1 else "",
            ", ".join(str(status.version) for status in loaded),
            "are" if len(loaded) > 1 else "is",
            extra={"model": name},
        )
        for status in loaded:
            self._unload_version(status)

    def _retire(self, previous: ModelRecord, record: ModelRecord, kept: Mapping[int, VersionStatus]) -> None:
        """Unload the previous versions the model did not keep serving as they are."""
        for version, status in previous.versions.items():
            if kept.get(version) is not status:
                self._unload_version(status)
        if previous.override_dir != record.override_dir:
            _drop_override(previous)

    def load_model(
        self, name: str, config: ModelConfig | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """(Re)load one model, optionally with ``config`` instead of its config.pbtxt and, with ``files``
        (``file:<path>`` -> content), from a temporary folder holding those files instead of the repository.

        Models it needs that are not serving load first. Fresh versions (and statistics) replace the
        old ones once every one of them is READY; when any fails, the versions already serving keep
        serving, as in Triton. Raises with Triton's texts when the model is not in any repository or
        a version fails to load.
        """
        serving = name in self._serving
        self._load_model(name, config, files, {name})
        if not serving:  # as in Triton: a model first loaded as another's need stays one
            self._mark_named([name])
        self._bring_back(name)

    def _bring_back(self, name: str) -> None:
        """Load again the models unloaded because ``name`` was (an ensemble whose step came back)."""
        with self._lock:
            dependents = sorted(self._taken_along.pop(name, ()))
        for dependent in dependents:
            if dependent in self._serving:
                continue
            logger.info("loading model '%s' again: model '%s', which it needs, is back", dependent, name)
            try:
                self._load_model(dependent, None, None, {dependent})
            except NaiadError as error:
                logger.error(
                    "model '%s' did not load again after model '%s' came back: %s",
                    dependent,
                    name,
                    error.message,
                    extra={"model": dependent},
                )

    def _load_model(
        self, name: str, config: ModelConfig | None, files: Mapping[str, bytes] | None, loading: set[str]
    ) -> None:
        try:
            override_dir = write_model_folder(name, config, files) if files else None
        except (NaiadError, OSError) as error:  # e.g. a path leaving the folder, a name too long
            raise load_request_refused(name, error.message if isinstance(error, NaiadError) else str(error)) from None
        source = ModelSource(name, override_dir) if override_dir is not None else self.discover().get(name)
        plan = self._plan(source, config) if source is not None else None
        if plan is None or plan.unreadable:  # Triton's answer; the log says why
            if override_dir is not None:
                remove_model_folder(override_dir)
            raise NaiadError(poll_failure(name), ErrorCode.INTERNAL)
        plan.record.override_dir = override_dir
        self._load_needs(plan, loading)
        self._install(plan)
        record = plan.record
        if record.error:
            ending = "\n" if record.error == no_version_error(name) else ""  # Triton's text ends so
            raise invalid_arg(f"load failed for model '{name}': {record.error}{ending}")
        # The versions the load was for: those it dropped (listed as unloaded) are no failure.
        unready = [status for v, status in sorted(record.versions.items()) if v in plan.versions and not status.ready]
        # The versions that failed, as Triton names them; not those unloaded again because another failed.
        failed = [status for status in unready if status.failure is not None] or unready
        if failed and plan.config is not None and plan.config.platform == ENSEMBLE_PLATFORM and failed[0].failure:
            # Triton's words for an ensemble whose steps do not fit: its error alone, no version
            raise invalid_arg(f"load failed for model '{name}': {failed[0].failure.message}\n")
        if failed:
            raise invalid_arg(f"load failed for model '{name}': {_versions_failed(failed)}\n")

    def _load_needs(self, plan: _Plan, loading: set[str]) -> None:
        """Load the models ``plan`` needs that are not serving (Triton's explicit mode does the same)."""
        for need in sorted(plan.needs - loading):
            if need in self._serving:
                continue
            logger.info("loading model '%s', which model '%s' needs", need, plan.record.name)
            try:
                self._load_model(need, None, None, loading | {need})
            except NaiadError as error:
                logger.error(
                    "model '%s' needs model '%s', which failed to load: %s",
                    plan.record.name,
                    need,
                    error.message,
                    extra={"model": plan.record.name},
                )

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

    def _model_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._model_locks.setdefault(name, threading.Lock())

    # -- unloading -----------------------------------------------------------------------------

    def unload_all(self) -> None:
        """Stop every version, finishing the requests each has accepted."""
        with self._lock:
            versions = [v for record in self._records.values() for v in record.versions.values()]
        for status in versions:
            self._unload_version(status)

    def _unload_version(self, status: VersionStatus) -> None:
        """Stop publishing the version, then let it finish what it accepted and release it.

        New requests miss it at once; the call returns when it is released, or after the unload
        timeout, leaving a thread to finish its requests and release it.
        """
        with self._lock:
            serving = status.serving
            if status.state is not ModelState.READY or serving is None:
                return
            status.state = ModelState.UNLOADING
            status.serving = None
            self._publish()
        self._notify(status)

        def release() -> None:
            try:
                release_version(serving)
            finally:
                status.state = ModelState.UNAVAILABLE
                status.reason = "unloaded"
                self._notify(status)
            logger.info(
                "successfully unloaded '%s' version %d",
                status.name,
                status.version,
                extra={"model": status.name, "version": status.version},
            )

        releaser = threading.Thread(target=release, name=f"naiad-unload-{status.name}", daemon=True)
        releaser.start()
        releaser.join(self._unload_timeout)
        if releaser.is_alive():
            logger.warning(
                "model '%s' version %d still has requests running %.0f s after it began to unload; they finish "
                "in the background and the version is released after them (see --model-unload-timeout-secs)",
                status.name,
                status.version,
                self._unload_timeout,
                extra={"model": status.name, "version": status.version},
            )

    def unload_model(self, name: str, *, unload_dependents: bool = False) -> None:
        """Unload every version of a model, and of the models that need it, as Triton does.

        With ``unload_dependents``, the models it needs go too unless a model still serving needs
        them or a load named them (Triton's explicitly loaded models). Unloaded models stay in the
        index as unloaded; unknown names are a no-op.
        """
        with self._lock:
            records = dict(self._records)
        needs = {n: r.needs for n, r in records.items()}
        loaded = {n for n, r in records.items() if any(s.ready for s in r.versions.values())}
        downstream = (_reachable({name}, needs, reverse=True) - {name}) & loaded
        upstream: set[str] = set()
        if unload_dependents:
            going = downstream | {name}
            candidates = _reachable({name}, needs) - going
            with self._lock:
                staying = (loaded - going - candidates) | (candidates & self._named_loads)
            upstream = (candidates - _reachable(staying, needs)) & loaded
        with self._lock:
            for dependents in self._taken_along.values():
                dependents.discard(name)  # unloaded on purpose: it stays unloaded
            if downstream:
                self._taken_along.setdefault(name, set()).update(downstream)
        for model in [*sorted(downstream), name, *sorted(upstream)]:
            if model != name:
                logger.info("unloading model '%s' with model '%s'", model, name, extra={"model": model})
            self._unload_record(model)

    def remove_model(self, name: str) -> None:
        """Unload a model whose folder left the repository (it leaves the index).

        The models that need it unload with it (listed as unloaded) and load again when it is back,
        as in Triton's poll mode.
        """
        self.unload_model(name)
        with self._lock:
            record = self._records.pop(name, None)
            unloaded = {v: s for v, s in record.versions.items() if s.reason == "unloaded"} if record else {}
            if record is not None and unloaded:  # remembered, as in Triton: its errors say it has no
                # versions, and it is listed as unloaded again when its folder is back
                self._records[name] = dataclasses.replace(record, versions=unloaded, error="")
            self._publish()

    def _unload_record(self, name: str) -> None:
        with self._model_lock(name):
            with self._lock:
                record = self._records.get(name)
            if record is None:
                return
            for status in list(record.versions.values()):
                self._unload_version(status)
            _drop_override(record)
            with self._lock:
                self._named_loads.discard(name)

    # -- queries -------------------------------------------------------------------------------

    def load_failure(self, name: str) -> str | None:
        """Why the last load of ``name`` left it without a serving version, as Triton words it in the
        error of an ensemble that needs it; None when no load of it failed."""
        with self._lock:
            record = self._records.get(name)
        if record is None:
            return None
        if record.error:
            return record.error
        failed = [status for _, status in sorted(record.versions.items()) if status.failure is not None]
        return _versions_failed(failed) if failed else None

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

    def index(self, *, in_repositories: bool = False) -> list[IndexEntry]:
        """One entry per known version; models that never got a version have ``version`` None.

        With ``in_repositories``, the entries are those of the models the repositories hold now,
        loaded or not (never loaded: state None), as Triton's repository-index API lists them; a
        model loaded from ``file:`` overrides alone, or whose folder was removed, is left out.
        """
        records = {record.name: record for record in self.records()}
        sources = discover_models(self._repositories) if in_repositories else {}
        names = set(sources) if in_repositories else set(records)
        entries: list[IndexEntry] = []
        for name in sorted(names):
            record = records.get(name)
            source = sources.get(name)
            if source is not None and source.duplicates:  # listed as Triton lists it, loaded or not
                entries.append(IndexEntry(name, None, ModelState.UNAVAILABLE, CLASH, clash=True))  # where: in the log
                continue
            if record is None:
                entries.append(IndexEntry(name, None, None, ""))
                continue
            if not record.versions:
                entries.append(IndexEntry(name, None, ModelState.UNAVAILABLE, record.error))
            for version, status in sorted(record.versions.items()):
                entries.append(IndexEntry(name, version, status.state, status.reason))
        return entries

    def replacement(self, model: ServingModel) -> ServingModel:
        """What serves a request that found ``model`` just before it was unpublished: ``model`` itself
        while it is published, else the version with its number, else the latest (after a reload or a
        version change); Triton's not-found error when the model is gone."""
        entry = self._serving.get(model.name)
        if entry is None:
            raise self._lookup_error(model.name, "")
        return entry.by_version.get(model.version) or entry.latest

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


def _refused(record: ModelRecord, error: NaiadError, *, unreadable: bool) -> _Plan:
    """The plan of a model that cannot be loaded, its reason logged and kept on its record."""
    record.error = error.message
    logger.error("model '%s' cannot be loaded: %s", record.name, error.message, extra={"model": record.name})
    return _Plan(record, unreadable=unreadable)


CLASH = "model appears in two or more repositories"
"""Triton's reason, in the repository index, for a model whose name is in several repositories."""


def _clash(source: ModelSource) -> str:
    """Why a model whose name is in several repositories is not loaded (Triton's words, and where)."""
    places = ", ".join(str(path) for path in (source.path, *source.duplicates))
    return f"{CLASH} ({places}); keep one"


def poll_failure(name: str) -> str:
    """Triton's answer to a load it cannot even read the model for (the reason goes to its log)."""
    return f"failed to load '{name}', failed to poll from model repository"


def requested_config(name: str, config_json: str | None) -> ModelConfig | None:
    """The config a load request sends in Triton's JSON (None: none sent); one that is not a config is
    refused as Triton refuses it (:func:`load_request_refused`)."""
    if config_json is None:
        return None
    try:
        return model_config.config_from_json(config_json)
    except NaiadError as error:
        raise load_request_refused(name, error.message) from None


def require_explicit_control(explicit: bool) -> None:
    """Refuse a load or unload request, as Triton does, unless models are under explicit control."""
    if not explicit:
        raise unavailable("explicit model load / unload is not allowed if polling is enabled")


def load_request_refused(name: str, reason: str) -> NaiadError:
    """The answer to a load request whose config or files are unusable: Triton's (500 / INTERNAL, its
    text), with the reason in the log for whoever sent it."""
    logger.error(
        "a load request for model '%s' was refused: %s; it was answered '%s', as Triton answers it. Fix the "
        "config or files sent with the request",
        name,
        reason,
        poll_failure(name),
        extra={"model": name},
    )
    return NaiadError(poll_failure(name), ErrorCode.INTERNAL)


def _continue_counters(old: Mapping[int, VersionStatus], fresh: Mapping[int, VersionStatus]) -> None:
    """A reloaded version's /metrics counters go on from those of the version it replaces, as Triton's."""
    for version, status in fresh.items():
        before = old.get(version)
        if before is None or before.serving is None or status.serving is None:
            continue
        if status.serving.statistics is not None and before.serving.statistics is not None:
            status.serving.statistics.follow(before.serving.statistics)


def _reachable(start: Collection[str], needs: Mapping[str, Collection[str]], *, reverse: bool = False) -> set[str]:
    """``start`` and every model it needs, directly or not (``reverse``: every model that needs it)."""
    edges: dict[str, set[str]] = {}
    for name, wanted in needs.items():
        for need in wanted:
            source, target = (need, name) if reverse else (name, need)
            edges.setdefault(source, set()).add(target)
    found = set(start)
    pending = list(start)
    while pending:
        for target in edges.get(pending.pop(), ()):
            if target not in found:
                found.add(target)
                pending.append(target)
    return found


def _drop_override(record: ModelRecord) -> None:
    """Remove the temporary folder a file-override load made for ``record``, if any."""
    if record.override_dir is not None:
        remove_model_folder(record.override_dir)
        record.override_dir = None


def no_version_error(name: str) -> str:
    """Triton's reason for a model whose version policy selects no version folder."""
    return f"at least one version must be available under the version policy of model '{name}'"


def _versions_failed(failed: list[VersionStatus]) -> str:
    """Triton's text for failed versions: newest first, each ending in ";"."""
    return "".join(f"version {v.version} is at UNAVAILABLE state: {v.reason};" for v in reversed(failed))
