"""Fixtures: model files built once per session, repositories, clients and an in-process loader.

``load_model(model_dir)`` loads a model through naiad's real load pipeline
(:func:`naiad.testing.load_model`) so tests can look at the completed config and the compiled
models; :func:`infer` runs one request on a chosen instance.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import datatypes
from naiad.testing import LoadedModel, ModelRepositoryBuilder
from naiad.testing import load_model as load_in_process

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


# -- in-process loading through naiad's load pipeline --------------------------------------

LoadModel = Callable[..., LoadedModel]


@pytest.fixture
def load_model() -> Iterator[LoadModel]:
    """:func:`naiad.testing.load_model` (``auto_complete=``, ``backend_config=``, ``gpu_count=``, ...);
    every model it loads is closed after the test."""
    loaded: list[LoadedModel] = []

    def load(model_dir: Path, **options: Any) -> LoadedModel:
        model = load_in_process(model_dir, **options)
        loaded.append(model)
        return model

    yield load
    for model in loaded:
        model.close()


def infer(model: LoadedModel, inputs: Mapping[str, npt.NDArray[Any]], instance: int = 0) -> Arrays:
    """One request executed as a batch on one instance; raises the response's error."""
    rows = next(iter(inputs.values())).shape[0] if model.config.max_batch_size > 0 else 1
    request, collector = model.request(inputs, batch_size=rows)
    model.execute([request], instance=instance)
    return collector.outputs()


def batch_of(rows: int, seed: int = 0) -> Arrays:
    """add_mul inputs with ``rows`` rows."""
    rng = np.random.default_rng(seed)
    return {
        "INPUT0": rng.standard_normal((rows, 4)).astype(np.float32),
        "INPUT1": rng.standard_normal((rows, 4)).astype(np.float32),
    }
