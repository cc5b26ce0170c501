"""What Triton fills into a model config on load (model-config.md §8).

:func:`detect_backend` is steps 1-2 (name, platform/backend/default file name),
:func:`fill_defaults` steps 3-7 (version policy, batcher defaults, pinned
memory, instance groups). Both edit the config in place.
"""

from __future__ import annotations

from pathlib import Path

from naiad.errors import invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInstanceGroup

__all__ = ["DEFAULT_MAX_SEQUENCE_IDLE_US", "ENSEMBLE_PLATFORM", "detect_backend", "fill_defaults"]

ENSEMBLE_PLATFORM = "ensemble"
DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000
_CPU_COUNT_2_BACKENDS = frozenset({"onnxruntime", "tensorflow"})

_TF_SAVEDMODEL = ("tensorflow_savedmodel", "model.savedmodel")
_TF_GRAPHDEF = ("tensorflow_graphdef", "model.graphdef")
_PYTORCH_PLATFORMS = frozenset({"pytorch_libtorch", "libtorch", "torch_aoti"})


def detect_backend(config: ModelConfig, model_dir: Path) -> None:
    """Fill ``name``, ``platform``, ``backend`` and ``default_model_filename`` (§8 steps 1-2).

    Follows Triton's order: explicit fields first, then the files in the first
    sub-directory of *model_dir* (lexicographic), then a directory named
    ``<x>.<backend>``. Raises INVALID_ARG when nothing determines a backend.
    """
    if not config.name:
        config.name = model_dir.name
    files = _VersionFiles(model_dir)
    # Only look at files when nothing in the config says what the model is.
    blank = not config.platform and not config.default_model_filename
    if _detect_tensorflow(config, files) or _detect_simple(
        config, "tensorrt", "tensorrt_plan", "model.plan", blank and files.is_file("model.plan")
    ):
        return
    if _detect_simple(config, "onnxruntime", "onnxruntime_onnx", "model.onnx", blank and files.exists("model.onnx")):
        return
    if _detect_simple(config, "openvino", "", "model.xml", blank and files.exists("model.xml")):
        return
    if _detect_pytorch(config, files, blank) or _detect_simple(
        config, "python", "", "model.py", blank and files.exists("model.py")
    ):
        return
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


class _VersionFiles:
    """The entries of the model's first sub-directory (Triton inspects only that one)."""

    def __init__(self, model_dir: Path) -> None:
        try:
            subdirs = sorted(p.name for p in model_dir.iterdir() if p.is_dir())
        except OSError:
            subdirs = []
        self.dir = model_dir / subdirs[0] if subdirs else None

    def exists(self, name: str) -> bool:
        return self.dir is not None and (self.dir / name).exists()

    def is_file(self, name: str) -> bool:
        return self.dir is not None and (self.dir / name).is_file()

    def is_dir(self, name: str) -> bool:
        return self.dir is not None and (self.dir / name).is_dir()


def _detect_tensorflow(config: ModelConfig, files: _VersionFiles) -> bool:
    if not config.platform and config.backend in ("", "tensorflow"):
        if config.default_model_filename in (_TF_SAVEDMODEL[1], _TF_GRAPHDEF[1]):
            saved = config.default_model_filename == _TF_SAVEDMODEL[1]
            config.platform = _TF_SAVEDMODEL[0] if saved else _TF_GRAPHDEF[0]
        elif not config.default_model_filename:
            if files.is_dir(_TF_SAVEDMODEL[1]):
                config.platform = _TF_SAVEDMODEL[0]
            if files.is_file(_TF_GRAPHDEF[1]):
                config.platform = _TF_GRAPHDEF[0]
    for platform, filename in (_TF_SAVEDMODEL, _TF_GRAPHDEF):
        if config.platform == platform:
            config.backend = config.backend or "tensorflow"
            config.default_model_filename = config.default_model_filename or filename
            return True
    return False


def _detect_simple(config: ModelConfig, backend: str, platform: str, filename: str, on_disk: bool) -> bool:
    """One backend whose platform (possibly none) and default file name are fixed."""
    if not config.backend and (
        (platform and config.platform == platform) or config.default_model_filename == filename or on_disk
    ):
        config.backend = backend
    if config.backend != backend:
        return False
    config.platform = config.platform or platform
    config.default_model_filename = config.default_model_filename or filename
    return True


def _detect_pytorch(config: ModelConfig, files: _VersionFiles, blank: bool) -> bool:
    aoti = config.platform == "torch_aoti" or config.default_model_filename == "model.pt2"
    if not config.backend:
        explicit = config.platform in _PYTORCH_PLATFORMS or config.default_model_filename in (
            "model.pt",
            "model.pt2",
        )
        if explicit or (blank and files.is_file("model.pt")):
            config.backend = "pytorch"
        elif blank and files.exists("model.pt2"):
            config.backend, aoti = "pytorch", True
    if config.backend != "pytorch":
        return False
    config.platform = config.platform or ("torch_aoti" if aoti else "pytorch_libtorch")
    default = "model.pt2" if config.platform == "torch_aoti" else "model.pt"
    config.default_model_filename = config.default_model_filename or default
    return True


def fill_defaults(config: ModelConfig, *, gpu_count: int = 0) -> None:
    """Apply Triton's load-time defaults (§8 steps 3-7) in place.

    ``version_policy`` (latest 1), batchers' ``preferred_batch_size``
    (``[max_batch_size]``), ``max_sequence_idle_microseconds`` (1 s), pinned
    memory and instance groups (non-ensembles), an ensemble's
    ``model_transaction_policy``; instance groups: one group named after the model
    when none is given, ``<model>_<index>`` names for unnamed groups, KIND_AUTO
    resolved by *gpu_count*, ``gpus`` filled for KIND_GPU, ``count`` 1 (2 for
    KIND_CPU on onnxruntime/tensorflow).
    """
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
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
    if config.platform == ENSEMBLE_PLATFORM or config.HasField("ensemble_scheduling"):
        # Triton always shows an ensemble's transaction policy; the loader sets
        # `decoupled` when a composing model is decoupled.
        config.model_transaction_policy.SetInParent()
        return
    optimization = config.optimization
    if not optimization.HasField("input_pinned_memory"):
        optimization.input_pinned_memory.enable = True
    if not optimization.HasField("output_pinned_memory"):
        optimization.output_pinned_memory.enable = True
    _fill_instance_groups(config, gpu_count)


def _fill_instance_groups(config: ModelConfig, gpu_count: int) -> None:
    gpus = list(range(max(gpu_count, 0)))
    if not config.instance_group:
        config.instance_group.add(name=config.name)
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            usable = bool(gpus) and all(0 <= gpu < len(gpus) for gpu in group.gpus)
            group.kind = ModelInstanceGroup.KIND_GPU if usable else ModelInstanceGroup.KIND_CPU
        if group.kind == ModelInstanceGroup.KIND_GPU and not group.gpus:
            group.gpus.extend(gpus)
        if group.count < 1:
            cpu_pair = group.kind == ModelInstanceGroup.KIND_CPU and config.backend in _CPU_COUNT_2_BACKENDS
            group.count = 2 if cpu_pair else 1
