"""Checking model repositories the way the server loads them, without serving.

Each model goes through the server's own steps: its config is read
(:func:`~naiad.config.read_model_config`), its name checked, its backend detected and its versions
picked; then, for each version, the backend loads the model and may complete the config, and naiad
fills the defaults and validates it (:meth:`~naiad.loading.VersionLoader.configure`), after which
the model is released again. An ensemble is checked after the models it names, with the server's
ensemble checks (:mod:`naiad.ensemble.graph`, :mod:`naiad.ensemble.composition`) against their
completed configs. Backends get a server handle over an event loop of the check's own
(:class:`~naiad.check.host.CheckHost`); no instance is created and no port is bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naiad import config as model_config
from naiad.check.host import CheckHost
from naiad.check.locate import field_line, line_of_message, value_line
from naiad.check.problems import CheckReport, Problem, sorted_problems
from naiad.config.normalize import ENSEMBLE_PLATFORM
from naiad.config.parsing import CONFIG_FILENAME, ConfigParseError
from naiad.config.paths import check_model_name, confined_path
from naiad.config.repository_agents import run_load_agents
from naiad.config.validate import ConfigInvalid
from naiad.dependencies import load_waves, model_dependencies
from naiad.devices import gpu_count
from naiad.ensemble.composition import check_composition
from naiad.ensemble.graph import EnsembleGraph
from naiad.errors import NaiadError
from naiad.loading import LoadOptions, VersionLoader
from naiad.logs import model_context
from naiad.plugins import BackendRegistry, BackendUnavailable
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.repository import ModelSource, discover_models
from naiad.server_handle import ServerHandle
from naiad.suggestions import SuggestingError

_PARSE_FIX = "correct the text there (protobuf text format, with the fields of Triton's model_config.proto)"
_VALIDATION_FIX = "correct this in config.pbtxt"
_ENSEMBLE_FIX = "correct the steps of ensemble_scheduling or the models they name"


@dataclass(eq=False)
class _Model:
    """A model under check: where it lives, its config as read and, per version, as completed."""

    source: ModelSource
    config_name: str = ""  # --model-config-name
    text: str = ""
    config: ModelConfig | None = None
    versions: list[int] = field(default_factory=list)
    completed: dict[int, ModelConfig] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def config_file(self) -> Path:
        return model_config.config_path(self.source.path, self.config_name) or self.source.path / CONFIG_FILENAME

    @property
    def file(self) -> str:
        """The file problems point at: config.pbtxt, or the model's folder when it has none."""
        return str(self.config_file if self.config_file.is_file() else self.source.path)


class RepositoryChecker:
    """Checks every model of ``repositories``; :meth:`run` returns what it found.

    ``auto_complete`` is the server's (off with ``--disable-auto-complete-config``); ``config_name`` its
    ``--model-config-name``.
    """

    def __init__(
        self,
        repositories: Sequence[Path],
        *,
        auto_complete: bool = True,
        config_name: str = "",
        registry: BackendRegistry | None = None,
    ) -> None:
        self._repositories = tuple(repositories)
        self._registry = registry or BackendRegistry()
        self._options = LoadOptions(
            auto_complete=auto_complete, gpu_count=gpu_count(), statistics=None, config_name=config_name
        )
        self._problems: list[Problem] = []

    def run(self) -> CheckReport:
        """Check every model; raises FileNotFoundError when a repository is not a folder."""
        self._registry.import_installed()  # as the server does: every installed backend's info counts
        models = {name: self._read(source) for name, source in discover_models(self._repositories).items()}
        needs = {
            name: frozenset(model_dependencies(model.config)) if model.config is not None else frozenset()
            for name, model in models.items()
        }
        waves, cycles = load_waves(needs)
        for name, cycle in cycles.items():
            self._add(
                models[name],
                f"circular dependency between ensembles: {' -> '.join(cycle)}",
                "break the cycle: an ensemble cannot be a step of itself, directly or through others",
            )
        with CheckHost(self._registry, self._repositories, self._options) as host:
            try:
                for wave in waves:
                    for name in wave:
                        self._complete(models[name], models, host.handle)
            finally:
                self._registry.finalize_all()
        order = list(models)
        return CheckReport(self._repositories, tuple(order), sorted_problems(self._problems, order))

    # -- reading and planning, as the server does before loading ---------------------------------

    def _read(self, source: ModelSource) -> _Model:
        model = _Model(source, self._options.config_name)
        if source.duplicates:
            places = ", ".join(str(path) for path in (source.path, *source.duplicates))
            self._add(model, f"appears in several model repositories ({places})", "keep one of them")
            return model
        try:
            if model.config_file.is_file():
                model.text = model.config_file.read_text(encoding="utf-8", errors="replace")
            config = model_config.read_model_config(
                source.path, model_name=model.name, config_name=self._options.config_name
            )
        except ConfigParseError as error:
            self._add_error(model, error, _PARSE_FIX, message=error.reason, line=error.line)
            return model
        except (NaiadError, OSError) as error:
            message = error.message if isinstance(error, NaiadError) else f"cannot read {model.config_file}: {error}"
            self._add(model, message, "make config.pbtxt a readable UTF-8 text file")
            return model
        try:
            check_model_name(config.name, model.name)
        except NaiadError as error:
            self._add_error(model, error, "give 'name' the folder's name, or leave it out")
            return model
        model.config = config
        self._plan(model, config)
        return model

    def _plan(self, model: _Model, config: ModelConfig) -> None:
        """Backend, model file and versions, as the server settles them before it loads a model."""
        path = model.source.path
        name_backend = 'name the backend in config.pbtxt, e.g. backend: "python"'
        try:
            run_load_agents(config, path, model.name)
        except NaiadError as error:
            self._add_error(model, error, "put the files the checksum agent expects in place, or update their hashes")
            return
        try:
            model_config.detect_backend(config, path, self._registry.table())
        except NaiadError as error:
            self._add_error(model, error, name_backend)
            return
        if config.default_model_filename:
            try:
                confined_path(
                    path, config.default_model_filename, "default_model_filename", model=model.name, from_request=False
                )
            except NaiadError as error:
                self._add_error(model, error, "give default_model_filename as a path inside the model's folder")
                return
        if not config.backend and not config.platform:
            self._add(
                model, "config.pbtxt sets neither 'backend' nor 'platform' and no model file names one", name_backend
            )
            return
        if not self._options.auto_complete and not model.config_file.is_file():
            self._add(
                model,
                "has no config.pbtxt, which is required when auto-complete is disabled",
                "write a complete config.pbtxt",
            )
            return
        available = model_config.list_version_dirs(path)
        chosen, warnings = model_config.select_versions(config.version_policy, available)
        for warning in warnings:
            self._add(
                model,
                warning,
                "add that version folder, or take the version out of version_policy",
                line=field_line(model.text, "version_policy"),
            )
        if not chosen:
            found = ", ".join(str(version) for version in available) or "none"
            self._add(
                model,
                f"has no loadable version: no version folder matches its version policy (folders found: {found})",
                f"add a numbered version folder (e.g. {path / '1'}) with the model's files, or change version_policy",
            )
        model.versions = chosen

    # -- completing and validating, as the server does when it loads -----------------------------

    def _complete(self, model: _Model, models: Mapping[str, _Model], server: ServerHandle) -> None:
        if model.config is None or not model.versions:
            return
        if model.config.platform == ENSEMBLE_PLATFORM:
            self._complete_ensemble(model, model.config, models)
            return
        for version in model.versions:
            self._complete_version(model, model.config, version, server)

    def _complete_version(self, model: _Model, config: ModelConfig, version: int, server: ServerHandle) -> None:
        loader = VersionLoader(self._registry, model.source.path, version, self._options, server)
        try:
            with model_context(model.name, version):
                _, completed, _ = loader.configure(config)
        except ConfigInvalid as error:
            self._add_invalid(model, error)
        except BackendUnavailable as error:
            fix = "install the backend as the message says, or name an installed one in 'backend'"
            self._add_error(model, error, fix, line=field_line(model.text, "backend"))
        except NaiadError as error:
            fix = f"fix the model's files in {model.source.path / str(version)} or its config, as the message says"
            self._add_error(model, error, fix)
        except Exception as error:  # a backend's own failure, as the server reports it
            self._add(
                model,
                f"version {version}: {type(error).__name__}: {error}",
                f"fix the model's files in {model.source.path / str(version)}; the backend raised this while loading",
            )
        else:
            model.completed[version] = completed
        finally:
            with model_context(model.name, version):
                loader.release(model.name)

    def _complete_ensemble(self, model: _Model, base: ModelConfig, models: Mapping[str, _Model]) -> None:
        config = ModelConfig()
        config.CopyFrom(base)
        steps = {step.model_name for step in config.ensemble_scheduling.step}
        failing = sorted(name for name in steps if name in models and not models[name].completed)
        if failing:
            self._add(
                model,
                f"its steps use models that have problems of their own: {', '.join(failing)}",
                "fix those models first; this ensemble's steps are checked against them once they pass",
                line=value_line(model.text, failing[0]),
            )
            return

        def config_of(name: str, version: int) -> ModelConfig:
            completed = models[name].completed
            chosen = max(completed) if version <= 0 else version  # as the server resolves a step's version
            if chosen not in completed:
                raise NaiadError(f"model '{name}' has no version {version}")
            return completed[chosen]

        try:
            check_composition(config, EnsembleGraph.of(config), config_of, lambda _: None, set(models))
            table = self._registry.table()
            model_config.fill_defaults(config, gpu_count=self._options.gpu_count, backends=table)
            model_config.validate_config(config, gpu_count=self._options.gpu_count, backends=table)
        except ConfigInvalid as error:
            self._add_invalid(model, error)
        except NaiadError as error:
            self._add_error(model, error, _ENSEMBLE_FIX)
        else:
            model.completed = dict.fromkeys(model.versions, config)

    # -- recording problems ----------------------------------------------------------------------

    def _add_invalid(self, model: _Model, error: ConfigInvalid) -> None:
        for problem in error.problems:
            self._add(model, problem, _VALIDATION_FIX, line=line_of_message(model.text, problem))

    def _add_error(
        self, model: _Model, error: NaiadError, fix: str, *, message: str | None = None, line: int | None = None
    ) -> None:
        """A problem from one of the server's errors; a misspelled name gets its closest match as the fix."""
        suggestion = None
        if isinstance(error, SuggestingError):
            if error.suggestions:
                suggestion = error.suggestions[0]
                fix = f"replace '{error.name}' with '{suggestion}'" if error.name else f"use '{suggestion}'"
            if line is None and error.name:
                line = value_line(model.text, error.name)
        if line is None:
            line = line_of_message(model.text, error.message)
        self._add(model, message or error.message, fix, line=line, suggestion=suggestion)

    def _add(
        self, model: _Model, message: str, fix: str, *, line: int | None = None, suggestion: str | None = None
    ) -> None:
        message = message.removeprefix(f"model '{model.name}': ").removeprefix(f"model '{model.name}' ")
        self._problems.append(Problem(model.name, model.file, line, message, fix, suggestion))


def check_repositories(
    repositories: Sequence[Path],
    *,
    auto_complete: bool = True,
    config_name: str = "",
    backend_directory: Path | None = None,
) -> CheckReport:
    """Check every model of ``repositories`` as the server would load it."""
    registry = BackendRegistry(backend_directory=backend_directory)
    return RepositoryChecker(
        repositories, auto_complete=auto_complete, config_name=config_name, registry=registry
    ).run()
