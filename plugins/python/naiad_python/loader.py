"""Import ``model.py`` files the way Triton does, but isolated inside one process.

Triton runs every model instance in its own interpreter. naiad runs them all in the
server process, so each *load* (one per instance, plus a throw-away one for
``auto_complete_config``) gets its own copy of the model's modules:

* ``<version dir>/model.py`` is imported as ``_naiad_python_models.<unit>.model``, where
  ``_naiad_python_models.<unit>`` is a synthetic package whose ``__path__`` is the version
  directory. ``from . import helpers`` therefore finds ``<version dir>/helpers.py`` as
  ``_naiad_python_models.<unit>.helpers``, a module private to this load.
* Every module loaded this way gets a private ``__builtins__`` whose ``__import__`` sends
  *absolute* imports of names that live in the version directory (or, failing that, the
  model directory) to the same private copies, so ``import helpers`` also gets this
  load's module and never another model's ``helpers``. Names the normal ``sys.path``
  resolves first (the standard library, installed packages) are left alone, as in
  Triton, where the model directories come last on ``sys.path``.
* A python-based backend's ``model.py`` lives in its backend's folder, which then stands for the
  version directory in both rules; ``get_model_dir()`` still answers the model's version folder.
* The version and model directories are also appended to ``sys.path`` (as Triton does) so
  that code bypassing ``import`` statements, e.g. ``importlib.import_module``, still finds
  the files; such imports are shared process-wide.

The private ``__builtins__`` also identifies which load a running frame belongs to, which
is how ``pb_utils.get_model_dir()`` answers correctly for each model, from any thread, and how
the ``pb_utils`` APIs that need the server (model control, custom metrics) find the calling
model's :class:`~naiad.backend.ServerHandle` (:attr:`ModelUnit.server`).
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from naiad.backend import ServerHandle

ROOT_PACKAGE = "_naiad_python_models"
_MODEL_DIR_SUFFIX = "__model_dir"
_UTILS_MODULE = "triton_python_backend_utils"

_lock = threading.RLock()
_counter = itertools.count()
_units: dict[str, ModelUnit] = {}  # package component (unit or unit__model_dir) -> unit
_units_by_builtins: dict[int, ModelUnit] = {}  # id(unit.builtins) -> unit
_path_refs: Counter[str] = Counter()


class ModelFileError(Exception):
    """The model file is missing or misnamed; the message names the file."""


@dataclass(eq=False)
class ModelUnit:
    """One isolated import of a model: its private package, modules and builtins, and its server."""

    model_name: str
    version: int
    version_dir: Path
    model_dir: Path
    model_file: Path
    slug: str
    builtins: dict[str, Any] = field(repr=False)
    module: ModuleType | None = field(default=None, repr=False)
    server: ServerHandle | None = field(default=None, repr=False)
    instance: str = ""  # the name of the instance this import serves
    serving: bool = False  # from the end of ``initialize`` until ``finalize``: BLS is allowed
    _unload_callbacks: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _decisions: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def code_dir(self) -> Path:
        """Where the model file's own imports are found: its folder."""
        return self.model_file.parent

    @property
    def package(self) -> str:
        """The synthetic package standing for the version directory."""
        return f"{ROOT_PACKAGE}.{self.slug}"

    @property
    def model_module(self) -> str:
        """The name the model file is imported as, inside :attr:`package`."""
        return f"{self.package}.{_slug(self.model_file.stem)}"

    @property
    def model_dir_package(self) -> str:
        """The synthetic package standing for the model directory."""
        return f"{ROOT_PACKAGE}.{self.slug}{_MODEL_DIR_SUFFIX}"

    def redirect(self, top_level: str) -> str | None:
        """The package to import ``top_level`` from, or None to import it normally (cached)."""
        try:
            return self._decisions[top_level]
        except KeyError:
            decision = self._decide(top_level)
            self._decisions[top_level] = decision
            return decision

    def _decide(self, name: str) -> str | None:
        if name in (_UTILS_MODULE, ROOT_PACKAGE) or name in sys.builtin_module_names:
            return None
        if name in sys.stdlib_module_names:
            return None
        for directory, package in (
            (self.code_dir, self.package),
            (self.model_dir, self.model_dir_package),
        ):
            local = importlib.machinery.PathFinder.find_spec(name, [str(directory)])
            if local is None:
                continue
            others = [entry for entry in sys.path if entry not in _path_refs]
            elsewhere = importlib.machinery.PathFinder.find_spec(name, others)
            local_is_namespace = local.loader is None
            if elsewhere is not None and (local_is_namespace or elsewhere.loader is not None):
                return None  # an earlier sys.path entry wins, as in Triton
            return package
        return None


class _UnitLoader(importlib.abc.Loader):
    """Wraps a file loader so the module runs with its unit's private ``__builtins__``.

    The module gets them when it is created; ``exec_module`` is the wrapped loader's own, so no frame
    of naiad's sits between the import system's and the module's (the ``At:`` block of an exception
    raised while the module runs lists the frames Triton lists, see :mod:`naiad_python.user_errors`).
    """

    def __init__(self, inner: importlib.abc.Loader, unit: ModelUnit) -> None:
        self._inner = inner
        self._unit = unit

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = self._inner.create_module(spec) or ModuleType(spec.name)
        module.__dict__["__builtins__"] = self._unit.builtins
        return module

    def __getattr__(self, name: str) -> Any:
        # exec_module, get_source, get_filename, get_resource_reader, is_package, ...
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _UnitFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of every unit's synthetic packages and wraps their loaders."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(ROOT_PACKAGE + "."):
            return None
        unit = _units.get(fullname.split(".", 2)[1])
        if unit is None or path is None:
            return None
        if fullname == unit.model_module:  # the model file, whatever its name
            origin = str(unit.model_file)
            loader = _UnitLoader(importlib.machinery.SourceFileLoader(fullname, origin), unit)
            return importlib.util.spec_from_file_location(fullname, origin, loader=loader)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _UnitLoader(spec.loader, unit)
        return spec


_finder = _UnitFinder()


def load_model_module(
    *,
    model_name: str,
    version: int,
    model_dir: Path,
    model_file: Path,
    tag: str,
    server: ServerHandle | None = None,
) -> ModelUnit:
    """Import ``model_file`` as a fresh, private module; ``tag`` names the load (instance name).

    ``server`` is the handle of the server the model is loaded in (from the load's context).

    Raises :class:`ModelFileError` for a missing or misnamed file; any exception raised by
    the model's module code propagates (after the partial import is cleaned up).
    """
    if model_file.suffix != ".py":
        raise ModelFileError(f"Model name must end with '.py'. Model name is \"{model_file.name}\".")
    if not model_file.is_file():
        raise ModelFileError(f"Python model file not found in '{model_file}'")
    # get_model_dir(): the model file's folder, or for a python-based backend's file (in its backend's
    # folder) the version's folder, as Triton answers
    version_dir = model_file.parent if model_file.is_relative_to(model_dir) else model_dir / str(version)
    slug = f"{_slug(model_name)}_v{version}_{_slug(tag)}_{next(_counter)}"
    unit_builtins = dict(builtins.__dict__)
    unit = ModelUnit(
        model_name, version, version_dir, model_dir, model_file, slug, unit_builtins, server=server, instance=tag
    )
    unit_builtins["__import__"] = _make_import(unit)
    with _lock:
        _register(unit)
    try:
        # The import statement's machinery, as Triton's stub imports the model: an exception raised
        # by the module's code lists the same importlib frames in its At: block (see user_errors).
        builtins.__import__(unit.model_module)
        unit.module = sys.modules[unit.model_module]
    except BaseException:
        unload_model_module(unit)
        raise
    return unit


def unload_model_module(unit: ModelUnit) -> None:
    """Forget a unit's modules (objects the model still holds stay alive) and its sys.path entries,
    then run its :func:`on_unload` callbacks."""
    with _lock:
        if _units.pop(unit.slug, None) is None:
            return
        callbacks, unit._unload_callbacks = unit._unload_callbacks, []
        _units.pop(unit.slug + _MODEL_DIR_SUFFIX, None)
        _units_by_builtins.pop(id(unit.builtins), None)
        # tuple() copies the keys in one step; a loop over sys.modules itself fails when another thread
        # imports meanwhile ("dictionary changed size during iteration").
        loaded = tuple(sys.modules)
        for package in (unit.package, unit.model_dir_package):
            for name in [n for n in loaded if n == package or n.startswith(package + ".")]:
                sys.modules.pop(name, None)
        for entry in (str(unit.code_dir), str(unit.model_dir)):
            _path_refs[entry] -= 1
            if _path_refs[entry] <= 0:
                del _path_refs[entry]
                while entry in sys.path:
                    sys.path.remove(entry)
    for callback in callbacks:
        callback()


def on_unload(unit: ModelUnit, callback: Callable[[], None]) -> bool:
    """Call ``callback`` when ``unit`` unloads; False (and never called) if it already has."""
    with _lock:
        if _units.get(unit.slug) is not unit:
            return False
        unit._unload_callbacks.append(callback)
        return True


def unit_of_caller(start: FrameType | None) -> ModelUnit | None:
    """The unit whose code is running in ``start`` or the nearest frame above it."""
    frame = start
    while frame is not None:
        unit = _units_by_builtins.get(id(frame.f_builtins))
        if unit is not None:
            return unit
        frame = frame.f_back
    return None


def _register(unit: ModelUnit) -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    if ROOT_PACKAGE not in sys.modules:
        sys.modules[ROOT_PACKAGE] = _package(ROOT_PACKAGE, [])
    sys.modules[unit.package] = _package(unit.package, [str(unit.code_dir)])
    sys.modules[unit.model_dir_package] = _package(unit.model_dir_package, [str(unit.model_dir)])
    _units[unit.slug] = unit
    _units[unit.slug + _MODEL_DIR_SUFFIX] = unit
    _units_by_builtins[id(unit.builtins)] = unit
    for entry in (str(unit.code_dir), str(unit.model_dir)):
        if _path_refs[entry] == 0 and entry not in sys.path:
            sys.path.append(entry)
        _path_refs[entry] += 1


def _package(name: str, path: list[str]) -> ModuleType:
    module = ModuleType(name, f"naiad python-backend package for {path[0] if path else 'model imports'}")
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = path
    module.__spec__ = spec
    module.__path__ = path
    module.__package__ = name
    return module


def _make_import(unit: ModelUnit) -> Any:
    def __import__(
        name: str,
        globals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> ModuleType:
        if level == 0:
            package = unit.redirect(name.partition(".")[0])
            if package is not None:
                return builtins.__import__(name, {"__package__": package, "__spec__": None}, locals, fromlist, 1)
        return builtins.__import__(name, globals, locals, fromlist, level)

    return __import__


def _slug(text: str) -> str:
    return re.sub(r"\W", "_", text) or "_"
