"""``EXECUTION_ENV_PATH``: a python model's own Python environment, as in Triton.

The parameter names a conda-pack archive (``.tar.gz``), unpacked once into a cache keyed by its
content's hash, or a directory holding a virtualenv; ``$$TRITON_MODEL_DIRECTORY`` stands for the model
directory (and in a config sent with a load request, the environment must be inside the model's
folder). The model's workers run that environment's interpreter. Its own packages come first; after
them the worker finds the server's (naiad itself and what it needs, and any library the environment
lacks) through the server's site directories, added last. So an environment needs nothing installed
for the same Python version, and numpy (its own build) for another; the load says so when it lacks it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

from naiad.backend import ErrorCode, ModelLoadContext, NaiadError

ENV_PARAMETER = "EXECUTION_ENV_PATH"
SITE_DIRS_VARIABLE = "NAIAD_SERVER_SITE_DIRS"
CACHE_VARIABLE = "NAIAD_CACHE_DIR"
_MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
_CHECK_TIMEOUT_S = 120.0

# Run by the environment's interpreter: the server's site directories go after its own, then the worker
# (or, to check the environment at load, the imports the worker needs).
_SERVER_SITE_DIRS_LAST = (
    "import os, site\n"
    f"for entry in os.environ.pop({SITE_DIRS_VARIABLE!r}, '').split(os.pathsep):\n"
    "    if entry:\n"
    "        site.addsitedir(entry)\n"
)
BOOTSTRAP = (
    _SERVER_SITE_DIRS_LAST
    + "import runpy\nrunpy.run_module('naiad_python.isolation.worker', run_name='__main__', alter_sys=True)\n"
)
_CHECK = _SERVER_SITE_DIRS_LAST + "import numpy, naiad_python.isolation.worker\n"

_checked: set[Path] = set()
_digests: dict[tuple[Path, int, int], str] = {}  # (archive, size, mtime) -> content hash: hashed once
_lock = threading.Lock()


def interpreter_for(context: ModelLoadContext) -> Path | None:
    """The interpreter of the model's ``EXECUTION_ENV_PATH`` environment (unpacked and checked), or
    None when it has none; NaiadError saying what is wrong otherwise."""
    parameter = context.config.parameters.get(ENV_PARAMETER)
    if parameter is None or not parameter.string_value.strip():
        return None
    where = f"python model '{context.model_name}': {ENV_PARAMETER}"
    raw = parameter.string_value.strip()
    if context.config_from_request:  # client input: only an environment inside the model's folder
        if not raw.startswith(_MODEL_DIRECTORY + "/"):
            raise NaiadError(
                f"{where} in a config sent with a load request must start with $$TRITON_MODEL_DIRECTORY/ "
                "(an environment inside the model's folder)",
                ErrorCode.INVALID_ARG,
            )
        path = context.path(raw[len(_MODEL_DIRECTORY) + 1 :], ENV_PARAMETER)
    else:
        path = Path(raw.replace(_MODEL_DIRECTORY, str(context.model_dir)))
    if not path.is_absolute():
        raise NaiadError(
            f"{where} '{path}' is not an absolute path; start it with $$TRITON_MODEL_DIRECTORY to name a file "
            "in the model directory",
            ErrorCode.INVALID_ARG,
        )
    if not path.exists():
        raise NaiadError(f"{where} '{path}' does not exist", ErrorCode.NOT_FOUND)
    if path.is_dir():
        root = path
    elif path.name.endswith(_ARCHIVE_SUFFIXES):
        root = _unpacked(path, where)
    else:
        raise NaiadError(
            f"{where} '{path}' is neither a directory (a virtualenv) nor a conda-pack archive (.tar.gz)",
            ErrorCode.INVALID_ARG,
        )
    interpreter = next((root / "bin" / name for name in ("python3", "python") if (root / "bin" / name).exists()), None)
    if interpreter is None:
        raise NaiadError(f"{where}: the environment at '{root}' has no bin/python3 or bin/python", ErrorCode.NOT_FOUND)
    _check(interpreter, where)
    return interpreter


def site_dirs() -> str:
    """The server's import path, for :data:`SITE_DIRS_VARIABLE`: what the worker finds after its own."""
    return os.pathsep.join(entry for entry in sys.path if entry and os.path.isdir(entry))


def cache_root() -> Path:
    """Where unpacked environments are kept: ``$NAIAD_CACHE_DIR`` or ``~/.cache/naiad``, then ``python-envs``."""
    base = os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "naiad"
    )
    return Path(base) / "python-envs"


def _unpacked(archive: Path, where: str) -> Path:
    """The archive unpacked in the cache (once per content: the directory is named by its hash)."""
    target = cache_root() / _digest(archive)[:32]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        with tarfile.open(archive) as bundle:
            bundle.extractall(staging, filter="data")  # nothing outside staging, no devices, no set-uid
        unpack = staging / "bin" / "conda-unpack"
        if unpack.exists():  # conda-pack's own step: rewrite the prefixes baked into the environment
            subprocess.run([str(unpack)], cwd=staging, check=True, capture_output=True, timeout=_CHECK_TIMEOUT_S)
        try:
            staging.rename(target)
        except OSError:  # another load unpacked it meanwhile
            if not target.is_dir():
                raise
    except (tarfile.TarError, OSError, subprocess.SubprocessError) as error:
        raise NaiadError(
            f"{where}: could not unpack '{archive}' into '{target}': {error}", ErrorCode.INVALID_ARG
        ) from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _digest(archive: Path) -> str:
    """The archive's content hash, read once while its size and modification time stay the same."""
    status = archive.stat()
    key = (archive, status.st_size, status.st_mtime_ns)
    with _lock:
        known = _digests.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with archive.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    with _lock:
        _digests[key] = digest.hexdigest()
    return digest.hexdigest()


def _check(interpreter: Path, where: str) -> None:
    """Fail the load now, saying why, if a worker could not start with ``interpreter`` (once per interpreter)."""
    with _lock:
        if interpreter in _checked:
            return
    environment = {**os.environ, SITE_DIRS_VARIABLE: site_dirs()}
    try:
        result = subprocess.run(
            [str(interpreter), "-c", _CHECK], env=environment, capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise NaiadError(f"{where}: could not run '{interpreter}': {error}", ErrorCode.INVALID_ARG) from error
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        hint = (
            "install numpy into that environment (a worker needs it, built for the environment's Python)"
            if "numpy" in result.stderr
            else "the worker could not start with it"
        )
        raise NaiadError(
            f"{where}: '{interpreter}' cannot run a python model worker ({last}); {hint}", ErrorCode.INVALID_ARG
        )
    with _lock:
        _checked.add(interpreter)
