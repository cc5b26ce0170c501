"""What Triton fills into a model config on load (model-config.md §8).

:func:`detect_backend` is steps 1-2 (name, platform/backend/default file name),
:func:`fill_defaults` steps 3-7 (version policy, batcher defaults, pinned
memory, instance groups), of which :func:`fill_load_defaults` are those Triton
fills before the backend completes the config. Both edit the config in place and take the facts of
each backend from a :class:`~naiad.backend_info.BackendTable` (Triton's own
table unless the installed plugins say more).
"""

from __future__ import annotations

from pathlib import Path

from naiad.backend_info import DEFAULT_BACKENDS, BackendInfo, BackendTable
from naiad.backend_sources import PROJECT_PLUGINS
from naiad.errors import invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInstanceGroup

__all__ = ["DEFAULT_MAX_SEQUENCE_IDLE_US", "ENSEMBLE_PLATFORM", "detect_backend", "fill_defaults", "fill_load_defaults"]

ENSEMBLE_PLATFORM = "ensemble"
PYTHON_RUNTIME = "model.py"  # a config's ``runtime`` naming a backend's python runtime
DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000
_KINDS = {"CPU": ModelInstanceGroup.KIND_CPU, "GPU": ModelInstanceGroup.KIND_GPU}


def detect_backend(config: ModelConfig, model_dir: Path, backends: BackendTable = DEFAULT_BACKENDS) -> None:
    """Fill ``name``, ``platform``, ``backend`` and ``default_model_filename`` (§8 steps 1-2).

    Follows Triton's order: explicit fields first, then the files in the first sub-directory of
    *model_dir* (lexicographic), then a directory named ``<x>.<backend>``. Raises INVALID_ARG when
    nothing determines a backend.
    """
    if not config.name:
        config.name = model_dir.name
    folder = _first_version_folder(model_dir)
    for info in backends:
        if _claim(config, info, folder):
            return
    if config.platform and not config.backend and config.platform != ENSEMBLE_PLATFORM:
        raise invalid_arg(_unknown_platform(config, backends))
    if config.backend or config.platform or config.default_model_filename:
        return
    _, dot, suffix = model_dir.name.partition(".")
    if not dot or not suffix:
        raise invalid_arg(
            f"model '{config.name}': cannot determine the backend: set 'backend' in config.pbtxt"
            f" (e.g. backend: \"python\"), or name the model directory '<name>.<backend>'"
        )
    config.backend = suffix
    config.default_model_filename = f"model.{suffix}"


def _unknown_platform(config: ModelConfig, backends: BackendTable) -> str:
    """Triton's words for a platform no backend serves, and what to set instead."""
    known = sorted({platform for info in backends for platform in info.platforms if platform} | {ENSEMBLE_PLATFORM})
    if config.platform in {info.name for info in backends} or config.platform in PROJECT_PLUGINS:
        hint = f"'{config.platform}' is a backend: set backend: \"{config.platform}\" in config.pbtxt"
    else:
        hint = f"set 'backend' in config.pbtxt, or a platform: {', '.join(known)}"
    return f"unexpected platform type '{config.platform}' for {config.name}; {hint}"


def _first_version_folder(model_dir: Path) -> Path | None:
    """The model's first sub-directory (Triton inspects only that one)."""
    try:
        subdirs = sorted(p.name for p in model_dir.iterdir() if p.is_dir())
    except OSError:
        return None
    return model_dir / subdirs[0] if subdirs else None


def _claim(config: ModelConfig, info: BackendInfo, folder: Path | None) -> bool:
    """Whether ``info``'s backend serves the model; if so, fill its platform and file name."""
    blank = not config.platform and not config.default_model_filename
    fmt = info.format_for(config.platform, config.default_model_filename)
    if fmt is None and blank:
        fmt = info.format_found_in(folder)
    if not config.backend:
        if fmt is None:
            return False
        config.backend = info.name
    elif config.backend != info.name:
        return False
    if fmt is None and not info.platform_required and info.formats:
        fmt = info.formats[0]
    if fmt is not None:
        if not config.platform and fmt.platforms:
            config.platform = fmt.platforms[0]
        if config.runtime != PYTHON_RUNTIME:  # a python runtime finds its own file (Triton's rule)
            config.default_model_filename = config.default_model_filename or fmt.filename
    return True


def fill_defaults(config: ModelConfig, *, gpu_count: int = 0, backends: BackendTable = DEFAULT_BACKENDS) -> None:
    """Apply Triton's load-time defaults (§8 steps 3-7) in place.

    Those of :func:`fill_load_defaults`, then batchers' ``preferred_batch_size``
    (``[max_batch_size]``), ``max_sequence_idle_microseconds`` (1 s) and an
    ensemble's ``model_transaction_policy``.
    """
    fill_load_defaults(config, gpu_count=gpu_count, info=backends.get(config.backend))
    if config.max_batch_size > 0:
        if config.HasField("dynamic_batching") and not config.dynamic_batching.preferred_batch_size:
            config.dynamic_batching.preferred_batch_size.append(config.max_batch_size)
        sequence = config.sequence_batching
        if (
            config.HasField("sequence_batching")
            and sequence.HasField("oldest")
            and not sequence.oldest.preferred_batch_size
        ):
            sequence.oldest.preferred_batch_size.append(config.max_batch_size)
    if config.HasField("sequence_batching") and config.sequence_batching.max_sequence_idle_microseconds == 0:
        config.sequence_batching.max_sequence_idle_microseconds = DEFAULT_MAX_SEQUENCE_IDLE_US
    if _is_ensemble(config):
        # Triton always shows an ensemble's transaction policy; the loader sets
        # `decoupled` when a composing model is decoupled.
        config.model_transaction_policy.SetInParent()


def fill_load_defaults(config: ModelConfig, *, gpu_count: int, info: BackendInfo) -> None:
    """The defaults Triton fills in before a backend sees the config (so a python model's
    ``auto_complete_config`` finds them): ``version_policy`` (latest 1) and, except for ensembles,
    pinned memory and instance groups: one group named after the model when none is given,
    ``<model>_<index>`` names for unnamed groups, KIND_AUTO resolved by ``gpu_count``, ``gpus``
    filled for KIND_GPU, ``count`` 1 (``info``'s CPU count for KIND_CPU). Idempotent.
    """
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    if _is_ensemble(config):
        return
    optimization = config.optimization
    if not optimization.HasField("input_pinned_memory"):
        optimization.input_pinned_memory.enable = True
    if not optimization.HasField("output_pinned_memory"):
        optimization.output_pinned_memory.enable = True
    _fill_instance_groups(config, gpu_count, info)


def _is_ensemble(config: ModelConfig) -> bool:
    return config.platform == ENSEMBLE_PLATFORM or config.HasField("ensemble_scheduling")


def _fill_instance_groups(config: ModelConfig, gpu_count: int, info: BackendInfo) -> None:
    gpus = list(range(max(gpu_count, 0)))
    if not config.instance_group:
        kind = _KINDS.get(info.default_instance_kind or "", ModelInstanceGroup.KIND_AUTO)
        config.instance_group.add(name=config.name, kind=kind)
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            usable = bool(gpus) and all(0 <= gpu < len(gpus) for gpu in group.gpus)
            group.kind = ModelInstanceGroup.KIND_GPU if usable else ModelInstanceGroup.KIND_CPU
        if group.kind == ModelInstanceGroup.KIND_GPU and not group.gpus:
            group.gpus.extend(gpus)
        if group.count < 1:
            cpu = group.kind == ModelInstanceGroup.KIND_CPU
            group.count = info.default_cpu_instance_count if cpu else 1
