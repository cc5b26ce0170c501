"""Drive the pytorch backend through naiad's real hooks, without a server.

``load(model_dir)`` loads a model the way naiad's loader does (read config, detect the backend,
``naiad_load_model``, fill defaults, validate, ``naiad_create_instance`` per instance);
``model.infer(...)`` sends real :class:`naiad.inference.InferenceRequest` objects and returns
the outputs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
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
    NaiadError,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    Tensor,
    datatypes,
)
from naiad.config import config_to_json, detect_backend, fill_defaults, read_model_config, validate_config
from naiad.plugins import Backend, BackendRegistry
from naiad.testing import ModelRepositoryBuilder

_KINDS = {
    ModelInstanceGroup.KIND_CPU: "CPU",
    ModelInstanceGroup.KIND_GPU: "GPU",
    ModelInstanceGroup.KIND_MODEL: "MODEL",
}


class LoadedModel:
    """A model loaded through the backend's hooks, with its instances."""

    def __init__(self, backend: Backend, model_dir: Path, *, auto_complete: bool, gpu_count: int = 0) -> None:
        config = read_model_config(model_dir)
        detect_backend(config, model_dir)
        self.name = config.name
        context = ModelLoadContext(
            model_name=config.name, version=1, model_dir=model_dir, config=config, auto_complete=auto_complete
        )
        self.model: BackendModel = backend.load_model(context)
        fill_defaults(config, gpu_count=gpu_count)
        validate_config(config, gpu_count=gpu_count)
        self.config: ModelConfig = config
        self.instances: list[ModelInstance] = []
        try:
            for group in config.instance_group:
                devices = list(group.gpus) if group.kind == ModelInstanceGroup.KIND_GPU else [0]
                for device in devices:
                    for _ in range(group.count):
                        instance_context = InstanceContext(
                            model_name=config.name,
                            version=1,
                            model_dir=model_dir,
                            name=f"{group.name}_{len(self.instances)}",
                            kind=_KINDS[group.kind],
                            device_id=device,
                            config=config,
                            config_json=config_to_json(config),
                        )
                        self.instances.append(backend.create_instance(self.model, instance_context))
        except BaseException:
            self.close()
            raise

    def infer(self, inputs: Mapping[str, npt.NDArray[Any]], *, instance: int = 0) -> dict[str, npt.NDArray[Any]]:
        """Run one request asking for every config output; raises the response's error."""
        response = self.respond(inputs, instance=instance)
        if response.error is not None:
            raise response.error
        return {tensor.name: tensor.data for tensor in response.outputs}

    def respond(self, inputs: Mapping[str, npt.NDArray[Any]], *, instance: int = 0) -> InferenceResponse:
        events: list[ResponseEvent] = []
        done = threading.Event()

        def deliver(event: ResponseEvent) -> None:
            events.append(event)
            if event.final:
                done.set()

        tensors = {}
        for name, array in inputs.items():
            datatype = datatypes.from_numpy(array.dtype).wire
            if name in {t.name for t in self.config.input}:
                datatype = datatypes.BY_NUMBER[next(t for t in self.config.input if t.name == name).data_type].wire
            data = datatypes.to_bytes_array(array) if datatype == "BYTES" else array
            tensors[name] = Tensor(name, datatype, data)
        request = InferenceRequest(
            model_name=self.name,
            model_version=1,
            inputs=tensors,
            requested_outputs={output.name: RequestedOutput(output.name) for output in self.config.output},
            sender=ResponseSender(deliver),
            batch_size=next(iter(inputs.values())).shape[0] if self.config.max_batch_size > 0 else 1,
        )
        self.instances[instance].execute([request])
        assert done.wait(10), "no final response"
        response = events[-1].response
        assert response is not None
        return response

    def close(self) -> None:
        for instance in self.instances:
            instance.finalize()
        self.instances.clear()
        self.model.finalize()


LoadModel = Callable[..., LoadedModel]


@pytest.fixture
def pytorch_backend() -> Backend:
    """The ``pytorch`` backend, found through its ``naiad.backends`` entry point."""
    return BackendRegistry().get("pytorch")


@pytest.fixture
def load(pytorch_backend: Backend, model_repository: ModelRepositoryBuilder) -> Iterator[LoadModel]:
    """``load(name, auto_complete=False)``: load ``<model_repository>/<name>`` through the hooks."""
    loaded: list[LoadedModel] = []

    def load_model(name: str, *, auto_complete: bool = False, gpu_count: int = 0) -> LoadedModel:
        model = LoadedModel(
            pytorch_backend, model_repository.root / name, auto_complete=auto_complete, gpu_count=gpu_count
        )
        loaded.append(model)
        return model

    yield load_model
    for model in loaded:
        model.close()


def load_error(load: LoadModel, name: str, *, auto_complete: bool = False) -> str:
    """The message of the error loading ``name`` raises."""
    with pytest.raises(NaiadError) as caught:
        load(name, auto_complete=auto_complete)
    return caught.value.message
