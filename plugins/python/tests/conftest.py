"""Drive the python backend through naiad's real hooks, without a server.

``load_model(model_dir)`` loads a model the way naiad's loader does (read config, detect the
backend, ``naiad_load_model``, fill defaults, validate, ``naiad_create_instance`` per
instance); ``model.infer(...)`` builds real :class:`naiad.inference.InferenceRequest` objects
whose senders collect the responses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

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
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    Tensor,
    datatypes,
)
from naiad.config import config_to_json, detect_backend, fill_defaults, read_model_config, validate_config
from naiad.plugins import Backend, BackendRegistry

from .models import PythonModelSpec, write_model


class Collected:
    """The events one request's sender delivered; :meth:`wait` blocks until the final flag."""

    def __init__(self) -> None:
        self.events: list[ResponseEvent] = []
        self._final = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, event: ResponseEvent) -> None:
        with self._lock:
            self.events.append(event)
        if event.final:
            self._final.set()

    def wait(self, timeout: float = 10.0) -> Collected:
        assert self._final.wait(timeout), f"no final response within {timeout} s: {self.events}"
        return self

    @property
    def responses(self) -> list[InferenceResponse]:
        return [event.response for event in self.events if event.response is not None]

    def only(self) -> InferenceResponse:
        """The single response of a non-decoupled request (asserts there is exactly one, final)."""
        self.wait()
        assert len(self.events) == 1, self.events
        assert self.events[0].final
        response = self.events[0].response
        assert response is not None
        return response

    def output(self, name: str) -> npt.NDArray[Any]:
        response = self.only()
        assert response.error is None, response.error
        return {tensor.name: tensor.data for tensor in response.outputs}[name]


def make_request(
    model_name: str,
    inputs: Mapping[str, npt.NDArray[Any]],
    *,
    outputs: Sequence[str] = (),
    **fields: Any,
) -> tuple[InferenceRequest, Collected]:
    """A core request for ``inputs`` (numpy arrays; str/bytes arrays become BYTES) and its collector."""
    collected = Collected()
    tensors = {}
    for name, array in inputs.items():
        datatype = datatypes.from_numpy(array.dtype)
        data = datatypes.to_bytes_array(array) if datatype.wire == "BYTES" else array
        tensors[name] = Tensor(name, datatype.wire, data)
    request = InferenceRequest(
        model_name=model_name,
        model_version=1,
        inputs=tensors,
        requested_outputs={name: RequestedOutput(name) for name in outputs},
        sender=ResponseSender(collected),
        **fields,
    )
    return request, collected


class LoadedModel:
    """A python model loaded through the backend's hooks, with its instances."""

    def __init__(self, backend: Backend, model_dir: Path, *, auto_complete: bool) -> None:
        config = read_model_config(model_dir)
        detect_backend(config, model_dir)
        self.name = config.name
        self.model_dir = model_dir
        self.context = ModelLoadContext(
            model_name=config.name, version=1, model_dir=model_dir, config=config, auto_complete=auto_complete
        )
        self.model: BackendModel = backend.load_model(self.context)
        fill_defaults(config, gpu_count=0)
        validate_config(config, gpu_count=0)
        self.config: ModelConfig = config
        self.config_json = config_to_json(config)
        self.instances: list[ModelInstance] = []
        try:
            for group in config.instance_group:
                assert group.kind == ModelInstanceGroup.KIND_CPU
                for _ in range(group.count):
                    context = InstanceContext(
                        model_name=config.name,
                        version=1,
                        model_dir=model_dir,
                        name=f"{group.name}_{len(self.instances)}",
                        kind="CPU",
                        device_id=0,
                        config=config,
                        config_json=self.config_json,
                    )
                    self.instances.append(backend.create_instance(self.model, context))
        except BaseException:
            self.close()
            raise

    def execute(self, requests: Sequence[InferenceRequest], *, instance: int = 0) -> None:
        self.instances[instance].execute(requests)

    def infer(
        self,
        inputs: Mapping[str, npt.NDArray[Any]],
        *,
        outputs: Sequence[str] = (),
        instance: int = 0,
        **fields: Any,
    ) -> Collected:
        """Run one request on one instance; returns its collector (not waited for)."""
        request, collected = make_request(self.name, inputs, outputs=outputs, **fields)
        self.execute([request], instance=instance)
        return collected

    def close(self) -> None:
        for instance in self.instances:
            instance.finalize()
        self.instances.clear()
        self.model.finalize()


LoadModel = Callable[..., LoadedModel]


@pytest.fixture
def python_backend() -> Backend:
    """The ``python`` backend, found through its ``naiad.backends`` entry point."""
    return BackendRegistry().get("python")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty model repository."""
    path = tmp_path / "models"
    path.mkdir()
    return path


@pytest.fixture
def load_model(python_backend: Backend, repo: Path) -> Iterator[Callable[..., LoadedModel]]:
    """``load_model(name, spec, auto_complete=False)``: write ``spec`` into ``repo`` and load it."""
    loaded: list[LoadedModel] = []

    def load(name: str, spec: PythonModelSpec, *, auto_complete: bool = False) -> LoadedModel:
        model = LoadedModel(python_backend, write_model(repo, name, spec), auto_complete=auto_complete)
        loaded.append(model)
        return model

    yield load
    for model in loaded:
        model.close()
