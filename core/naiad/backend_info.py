"""What a backend tells naiad about itself before any model loads.

A plugin's ``naiad_backend_info`` hook returns a :class:`BackendInfo`: the platforms it serves, the
model files that identify its models, its instance defaults and its capabilities. naiad uses them to
pick the backend of a model whose config does not name one, to fill the config's defaults and to
validate it. :data:`TRITON_BACKENDS` holds Triton's own table, in Triton's detection order; it is
the default for a backend of that name that is not installed or gives no info of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


class OnDisk(enum.Enum):
    """What a model file must be for its presence to identify the backend."""

    FILE = "file"
    DIRECTORY = "directory"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class ModelFormat:
    """One kind of model file a backend loads.

    ``filename`` is the ``default_model_filename`` it implies; ``platforms`` the config
    ``platform`` values that name it, the first being the one naiad fills in (none: the platform
    stays empty); ``on_disk`` what a file of that name in the first version folder must be for
    naiad to pick this backend from it.
    """

    filename: str
    platforms: tuple[str, ...] = ()
    on_disk: OnDisk = OnDisk.ANY

    def found_in(self, folder: Path | None) -> bool:
        if folder is None:
            return False
        path = folder / self.filename
        if self.on_disk is OnDisk.FILE:
            return path.is_file()
        if self.on_disk is OnDisk.DIRECTORY:
            return path.is_dir()
        return path.exists()


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Config features only some backends support; naiad refuses them for the others."""

    shape_tensors: bool = False  # inputs/outputs with is_shape_tensor
    non_linear_io: bool = False  # is_non_linear_format_io
    optimization_profiles: bool = False  # instance_group.profile
    device_memory: bool = False  # takes and returns GPU tensors (Tensor.memory GPU)


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """A backend's facts.

    ``formats`` lists its model files, the default first. ``platform_required``: a config naming
    the backend must also name one of its platforms (TensorFlow). ``checks_platform``: a config
    platform that is none of the formats' is refused. ``default_instance_kind`` (``"CPU"`` or
    ``"GPU"``) is the kind of the instance group naiad adds when the config has none (None:
    Triton's KIND_AUTO rule, GPU when there is one); ``default_cpu_instance_count`` the count of a
    KIND_CPU group that sets none.
    """

    name: str
    formats: tuple[ModelFormat, ...] = ()
    platform_required: bool = False
    checks_platform: bool = False
    default_instance_kind: str | None = None
    default_cpu_instance_count: int = 1
    capabilities: Capabilities = field(default_factory=Capabilities)

    @property
    def platforms(self) -> frozenset[str]:
        """Every platform value that names this backend."""
        return frozenset(platform for fmt in self.formats for platform in fmt.platforms)

    def format_for(self, platform: str = "", filename: str = "") -> ModelFormat | None:
        """The format a config's platform (first) or default file name names, if any."""
        for fmt in self.formats:
            if platform and platform in fmt.platforms:
                return fmt
        for fmt in self.formats:
            if filename and filename == fmt.filename:
                return fmt
        return None

    def format_found_in(self, folder: Path | None) -> ModelFormat | None:
        """The first format whose model file is in ``folder``."""
        return next((fmt for fmt in self.formats if fmt.found_in(folder)), None)


TRITON_BACKENDS: tuple[BackendInfo, ...] = (
    BackendInfo(
        "tensorflow",
        (
            ModelFormat("model.graphdef", ("tensorflow_graphdef",), OnDisk.FILE),
            ModelFormat("model.savedmodel", ("tensorflow_savedmodel",), OnDisk.DIRECTORY),
        ),
        platform_required=True,
        checks_platform=True,
        default_cpu_instance_count=2,
    ),
    BackendInfo(
        "tensorrt",
        (ModelFormat("model.plan", ("tensorrt_plan",), OnDisk.FILE),),
        checks_platform=True,
        capabilities=Capabilities(
            shape_tensors=True, non_linear_io=True, optimization_profiles=True, device_memory=True
        ),
    ),
    BackendInfo(
        "onnxruntime",
        (ModelFormat("model.onnx", ("onnxruntime_onnx",)),),
        checks_platform=True,
        default_cpu_instance_count=2,
    ),
    BackendInfo("openvino", (ModelFormat("model.xml"),), default_instance_kind="CPU"),
    BackendInfo(
        "pytorch",
        (
            ModelFormat("model.pt", ("pytorch_libtorch", "libtorch"), OnDisk.FILE),
            ModelFormat("model.pt2", ("torch_aoti",)),
        ),
        checks_platform=True,
    ),
    BackendInfo("python", (ModelFormat("model.py"),)),
)
"""Triton's backends, in the order Triton looks for their model files."""


class BackendTable:
    """The backends naiad knows, in detection order: Triton's first, then other installed ones."""

    def __init__(self, infos: Iterable[BackendInfo] = TRITON_BACKENDS) -> None:
        self._infos: dict[str, BackendInfo] = {}
        for info in infos:
            self._infos[info.name] = info

    def with_installed(self, installed: Iterable[BackendInfo]) -> BackendTable:
        """This table with installed backends' own infos: Triton's names keep their place."""
        infos = dict(self._infos)
        for info in installed:
            infos[info.name] = info
        return BackendTable(infos.values())

    def __iter__(self) -> Iterator[BackendInfo]:
        return iter(self._infos.values())

    def get(self, name: str) -> BackendInfo:
        """The info of backend ``name``; an unknown backend gets an info with no facts."""
        return self._infos.get(name) or BackendInfo(name)

    def backend_of_platform(self, platform: str) -> str | None:
        """The backend a platform value names, if any."""
        for info in self._infos.values():
            if platform in info.platforms:
                return info.name
        return None


DEFAULT_BACKENDS = BackendTable()
