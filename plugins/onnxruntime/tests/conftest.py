"""Load ONNX models in process with :func:`naiad.testing.load_model` and drive one instance at a time.

``load(name)`` runs naiad's real load pipeline on ``repo/<name>`` (backend detection, the
backend's hooks, defaults, validation, ``configured``, instances, scheduler); ``infer`` runs one
request on one chosen instance, as a scheduler would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from naiad.backend import ModelConfig, ModelInstance, NaiadError
from naiad.testing import LoadedModel, ResponseCollector, load_model

BackendConfig = Mapping[str, Mapping[str, str]]


class Loaded:
    """A loaded model version whose requests run on an instance picked by the test."""

    def __init__(self, model: LoadedModel) -> None:
        self.model = model

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def instances(self) -> list[ModelInstance]:
        return self.model.instances

    def infer(
        self, inputs: Mapping[str, npt.NDArray[Any]], outputs: Sequence[str] = (), *, instance: int = 0
    ) -> ResponseCollector:
        """Run one request on instance ``instance``; its response lands in the returned collector."""
        batch_size = next(iter(inputs.values())).shape[0] if self.config.max_batch_size > 0 else 1
        request, collector = self.model.request(inputs, outputs=outputs, batch_size=batch_size)
        self.model.execute([request], instance=instance)
        return collector


def error_of(collector: ResponseCollector) -> NaiadError:
    """The error of the collector's single response (which must have failed)."""
    error = collector.only().error
    assert error is not None
    return error


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "models"
    path.mkdir()
    return path


@pytest.fixture
def load(repo: Path) -> Iterator[Any]:
    """``load(name, auto_complete=True, backend_config={})``: load ``repo/<name>``; ``backend_config``
    is ``{backend: {key: value}}`` (``""`` for the global settings)."""
    loaded: list[LoadedModel] = []

    def _load(name: str, *, auto_complete: bool = True, backend_config: BackendConfig | None = None) -> Loaded:
        model = load_model(repo / name, auto_complete=auto_complete, backend_config=backend_config)
        loaded.append(model)
        return Loaded(model)

    yield _load
    for model in loaded:
        model.close()


def write_model(repo: Path, name: str, model: Any, config: str | None = None, filename: str = "model.onnx") -> Path:
    """``repo/<name>/1/<filename>`` (an ``onnx.ModelProto``) plus ``config.pbtxt`` when given."""
    import textwrap

    import onnx

    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(folder / "1" / filename))
    if config is not None:
        (folder / "config.pbtxt").write_text(textwrap.dedent(config))
    return folder


def ort_reference(model: Any, inputs: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """The model's own outputs from a plain ONNX Runtime session, to compare served results with."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs)), strict=True))


def floats(*shape: int, seed: int = 0) -> npt.NDArray[np.float32]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
