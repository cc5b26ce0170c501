"""Load ONNX models through naiad's real hooks (in process) and through the real server.

``load(repo, name)`` runs what naiad's loader runs — read config, detect the backend,
``naiad_load_model``, fill defaults, validate, ``naiad_create_instance`` per instance — and
returns the completed config with the instances; ``infer`` drives one instance with real
:class:`naiad.inference.InferenceRequest` objects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from naiad.backend import (
    BackendModel,
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    ModelConfig,
    ModelInstance,
    ModelInstanceGroup,
    ModelLoadContext,
    NaiadError,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    Tensor,
    datatypes,
)
from naiad.config import config_to_json, detect_backend, fill_defaults, read_model_config, validate_config
from naiad.plugins import Backend, BackendRegistry

_KINDS = {
    ModelInstanceGroup.KIND_CPU: "CPU",
    ModelInstanceGroup.KIND_GPU: "GPU",
    ModelInstanceGroup.KIND_MODEL: "MODEL",
}


class Collected:
    """The events one request's sender delivered."""

    def __init__(self) -> None:
        self.events: list[ResponseEvent] = []
        self._final = threading.Event()

    def __call__(self, event: ResponseEvent) -> None:
        self.events.append(event)
        if event.final:
            self._final.set()

    def response(self) -> InferenceResponse:
        assert self._final.wait(10), "no final response"
        assert len(self.events) == 1, self.events
        response = self.events[0].response
        assert response is not None
        return response

    def outputs(self) -> dict[str, npt.NDArray[Any]]:
        response = self.response()
        assert response.error is None, response.error
        return {tensor.name: tensor.data for tensor in response.outputs}

    def error(self) -> NaiadError:
        error = self.response().error
        assert error is not None
        return error


class Loaded:
    """A model version loaded through the onnxruntime backend's hooks."""

    def __init__(self, backend: Backend, model_dir: Path, *, auto_complete: bool, backend_config: Mapping[str, str]):
        config = read_model_config(model_dir)
        detect_backend(config, model_dir)
        self.context = ModelLoadContext(
            model_name=config.name,
            version=1,
            model_dir=model_dir,
            config=config,
            auto_complete=auto_complete,
            backend_config=dict(backend_config),
        )
        self.model: BackendModel = backend.load_model(self.context)
        fill_defaults(config, gpu_count=0)
        validate_config(config, gpu_count=0)
        self.config: ModelConfig = config
        self.instances: list[ModelInstance] = []
        try:
            for group in config.instance_group:
                for _ in range(group.count):
                    context = InstanceContext(
                        model_name=config.name,
                        version=1,
                        model_dir=model_dir,
                        name=f"{group.name}_{len(self.instances)}",
                        kind=_KINDS[group.kind],
                        device_id=0,
                        config=config,
                        config_json=config_to_json(config),
                    )
                    self.instances.append(backend.create_instance(self.model, context))
        except BaseException:
            self.close()
            raise

    def infer(
        self, inputs: Mapping[str, npt.NDArray[Any]], outputs: Sequence[str] = (), *, instance: int = 0
    ) -> Collected:
        request, collected = make_request(self.config, inputs, outputs)
        self.instances[instance].execute([request])
        return collected

    def close(self) -> None:
        for instance in self.instances:
            instance.finalize()
        self.instances.clear()
        self.model.finalize()


def make_request(
    config: ModelConfig, inputs: Mapping[str, npt.NDArray[Any]], outputs: Sequence[str] = ()
) -> tuple[InferenceRequest, Collected]:
    collected = Collected()
    tensors = {}
    for name, array in inputs.items():
        datatype = datatypes.from_numpy(array.dtype)
        data = datatypes.to_bytes_array(array) if datatype.wire == "BYTES" else array
        tensors[name] = Tensor(name, datatype.wire, data)
    first = next(iter(inputs.values()))
    request = InferenceRequest(
        model_name=config.name,
        model_version=1,
        inputs=tensors,
        requested_outputs={
            name: RequestedOutput(name) for name in list(outputs) or [output.name for output in config.output]
        },
        sender=ResponseSender(collected),
        batch_size=first.shape[0] if config.max_batch_size > 0 else 1,
    )
    return request, collected


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "models"
    path.mkdir()
    return path


@pytest.fixture
def backend() -> Backend:
    """The ``onnxruntime`` backend, found through its ``naiad.backends`` entry point."""
    return BackendRegistry().get("onnxruntime")


@pytest.fixture
def load(backend: Backend, repo: Path) -> Iterator[Any]:
    """``load(name, auto_complete=True, backend_config={})``: load ``repo/<name>`` through the hooks."""
    loaded: list[Loaded] = []

    def _load(name: str, *, auto_complete: bool = True, backend_config: Mapping[str, str] | None = None) -> Loaded:
        model = Loaded(backend, repo / name, auto_complete=auto_complete, backend_config=backend_config or {})
        loaded.append(model)
        return model

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
