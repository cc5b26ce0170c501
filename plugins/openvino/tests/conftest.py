"""Fixtures: model files built once per session, repositories, clients and an in-process loader.

``load_model(model_dir)`` loads a model the way naiad's loader does (read config, detect the
backend, ``naiad_load_model``, fill defaults, validate, ``naiad_create_instance`` per
instance) so tests can look at the completed config and the compiled models.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import (
    BackendModel,
    InferenceRequest,
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
from naiad.testing import ModelRepositoryBuilder

from . import models

Arrays = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class Sources:
    """Model files shared by every test (read-only; copy them into repositories)."""

    add_mul_onnx: Path
    add_mul_xml: Path
    static_onnx: Path  # add_mul with a static batch dimension of 1
    static_xml: Path
    varlen_xml: Path
    int_onnx: Path
    int_xml: Path


@pytest.fixture(scope="session")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Sources:
    root = tmp_path_factory.mktemp("sources")
    add_mul = models.add_mul(root / "add_mul.onnx")
    static = models.add_mul(root / "static.onnx", batch=1)
    varlen = models.varlen(root / "varlen.onnx")
    integer = models.int_affine(root / "int.onnx")
    return Sources(
        add_mul_onnx=add_mul,
        add_mul_xml=models.to_ir(add_mul, root / "ir" / "add_mul.xml"),
        static_onnx=static,
        static_xml=models.to_ir(static, root / "ir" / "static.xml"),
        varlen_xml=models.to_ir(varlen, root / "ir" / "varlen.xml"),
        int_onnx=integer,
        int_xml=models.to_ir(integer, root / "ir" / "int.xml"),
    )


def place(repository: ModelRepositoryBuilder, name: str, config: str | None, source: Path) -> Path:
    """Add model ``name`` whose version 1 holds ``source`` as model.xml + model.bin or model.onnx."""
    model_dir = repository.add_model(name, config)
    version = model_dir / "1"
    version.mkdir(exist_ok=True)
    if source.suffix == ".xml":
        shutil.copy(source, version / "model.xml")
        shutil.copy(source.with_suffix(".bin"), version / "model.bin")
    else:
        shutil.copy(source, version / "model.onnx")
    return model_dir


# -- clients ------------------------------------------------------------------------------


def infer_http(url: str, model: str, inputs: Mapping[str, npt.NDArray[Any]], outputs: Sequence[str]) -> Arrays:
    client = httpclient.InferenceServerClient(url)
    tensors = []
    for name, array in inputs.items():
        tensor = httpclient.InferInput(name, list(array.shape), datatypes.from_numpy(array.dtype).wire)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = client.infer(model, tensors, outputs=[httpclient.InferRequestedOutput(name) for name in outputs])
    return {name: result.as_numpy(name) for name in outputs}


def infer_grpc(url: str, model: str, inputs: Mapping[str, npt.NDArray[Any]], outputs: Sequence[str]) -> Arrays:
    client = grpcclient.InferenceServerClient(url)
    tensors = []
    for name, array in inputs.items():
        tensor = grpcclient.InferInput(name, list(array.shape), datatypes.from_numpy(array.dtype).wire)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = client.infer(model, tensors, outputs=[grpcclient.InferRequestedOutput(name) for name in outputs])
    return {name: result.as_numpy(name) for name in outputs}


PROTOCOLS: dict[str, Callable[[str, str, Mapping[str, npt.NDArray[Any]], Sequence[str]], Arrays]] = {
    "http": infer_http,
    "grpc": infer_grpc,
}


# -- in-process loading through the real hooks ----------------------------------------------


class Collected:
    """The final response event one request's sender delivered."""

    def __init__(self) -> None:
        self.event: ResponseEvent | None = None
        self.done = threading.Event()

    def __call__(self, event: ResponseEvent) -> None:
        self.event = event
        if event.final:
            self.done.set()


class LoadedModel:
    """A model loaded through the backend's hooks, with its instances."""

    def __init__(self, backend: Backend, model_dir: Path, auto_complete: bool, backend_config: dict[str, str]) -> None:
        config = read_model_config(model_dir)
        detect_backend(config, model_dir)
        self.context = ModelLoadContext(
            model_name=config.name,
            version=1,
            model_dir=model_dir,
            config=config,
            auto_complete=auto_complete,
            backend_config=backend_config,
        )
        self.model: BackendModel = backend.load_model(self.context)
        fill_defaults(config, gpu_count=0)
        validate_config(config, gpu_count=0)
        self.config: ModelConfig = config
        self.instances: list[ModelInstance] = []
        try:
            for group in config.instance_group:
                kind = ModelInstanceGroup.Kind.Name(group.kind).removeprefix("KIND_")
                for _ in range(group.count):
                    context = InstanceContext(
                        model_name=config.name,
                        version=1,
                        model_dir=model_dir,
                        name=f"{group.name}_{len(self.instances)}",
                        kind=kind,
                        device_id=0,
                        config=config,
                        config_json=config_to_json(config),
                    )
                    self.instances.append(backend.create_instance(self.model, context))
        except BaseException:
            self.close()
            raise

    def infer(self, inputs: Mapping[str, npt.NDArray[Any]], instance: int = 0) -> Arrays:
        """One request on one instance; raises the response's error."""
        collected = Collected()
        request = InferenceRequest(
            model_name=self.config.name,
            model_version=1,
            inputs={
                name: Tensor(name, datatypes.from_numpy(array.dtype).wire, array) for name, array in inputs.items()
            },
            requested_outputs={output.name: RequestedOutput(output.name) for output in self.config.output},
            sender=ResponseSender(collected),
            batch_size=next(iter(inputs.values())).shape[0] if self.config.max_batch_size > 0 else 1,
        )
        self.instances[instance].execute([request])
        assert collected.done.wait(10)
        assert collected.event is not None
        response = collected.event.response
        assert response is not None
        if response.error is not None:
            raise response.error
        return {tensor.name: tensor.data for tensor in response.outputs}

    def close(self) -> None:
        for instance in self.instances:
            instance.finalize()
        self.instances.clear()
        self.model.finalize()


LoadModel = Callable[..., LoadedModel]


@pytest.fixture
def openvino_backend() -> Backend:
    """The ``openvino`` backend, found through its ``naiad.backends`` entry point."""
    return BackendRegistry().get("openvino")


@pytest.fixture
def load_model(openvino_backend: Backend) -> Iterator[LoadModel]:
    """``load_model(model_dir, auto_complete=True, backend_config={})``."""
    loaded: list[LoadedModel] = []

    def load(
        model_dir: Path, *, auto_complete: bool = True, backend_config: dict[str, str] | None = None
    ) -> LoadedModel:
        model = LoadedModel(openvino_backend, model_dir, auto_complete, dict(backend_config or {}))
        loaded.append(model)
        return model

    yield load
    for model in loaded:
        model.close()


def batch_of(rows: int, seed: int = 0) -> Arrays:
    """add_mul inputs with ``rows`` rows."""
    rng = np.random.default_rng(seed)
    return {
        "INPUT0": rng.standard_normal((rows, 4)).astype(np.float32),
        "INPUT1": rng.standard_normal((rows, 4)).astype(np.float32),
    }
