"""Load python models in-process through naiad's real load pipeline (:func:`naiad.testing.load_model`).

``load_model(name, spec)`` writes ``spec`` into a temporary repository and loads it;
``model.infer(...)`` runs one request on one chosen instance and returns its
:class:`~naiad.testing.ResponseCollector`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy.typing as npt
import pytest
import tritonclient.http as httpclient

from naiad.backend import InferenceRequest, ModelConfig, ModelInstance
from naiad.testing import LoadedModel, ResponseCollector, ThreadedServer
from naiad.testing import load_model as load_in_process

from .models import PythonModelSpec, isolated, write_model

Inputs = Mapping[str, npt.NDArray[Any]]


class PythonTestModel:
    """A loaded python model whose requests run as batches on one chosen instance."""

    def __init__(self, loaded: LoadedModel, model_dir: Path) -> None:
        self.loaded = loaded
        self.model_dir = model_dir

    @property
    def config(self) -> ModelConfig:
        return self.loaded.config

    @property
    def config_json(self) -> str:
        return self.loaded.config_json

    @property
    def instances(self) -> list[ModelInstance]:
        return self.loaded.instances

    def request(
        self, inputs: Inputs, *, outputs: Sequence[str] = (), **fields: Any
    ) -> tuple[InferenceRequest, ResponseCollector]:
        """A request for :meth:`execute` (see :meth:`naiad.testing.LoadedModel.request`)."""
        return self.loaded.request(inputs, outputs=outputs, **fields)

    def execute(self, requests: Sequence[InferenceRequest], *, instance: int = 0) -> None:
        self.loaded.execute(requests, instance=instance)

    def infer(
        self, inputs: Inputs, *, outputs: Sequence[str] = (), instance: int = 0, **fields: Any
    ) -> ResponseCollector:
        """Run one request on one instance; returns its collector (not waited for)."""
        request, collector = self.request(inputs, outputs=outputs, **fields)
        self.execute([request], instance=instance)
        return collector

    def close(self) -> None:
        self.loaded.close()


LoadModel = Callable[..., PythonTestModel]


async def await_ready(instance: ModelInstance) -> bool:
    """The instance's ``async def is_ready``, awaited as naiad awaits it on its loop."""
    return await cast(Awaitable[bool], instance.is_ready())


def ready(instance: ModelInstance) -> bool:
    """:func:`await_ready` on a loop of its own."""
    return asyncio.run(await_ready(instance))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty model repository."""
    path = tmp_path / "models"
    path.mkdir()
    return path


@pytest.fixture(params=["thread", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    """Where the python models of a test run: in this process or in worker processes."""
    mode: str = request.param
    return mode


@pytest.fixture
def load_model(repo: Path, isolation: str) -> Iterator[LoadModel]:
    """``load_model(name, spec, auto_complete=False)``: write ``spec`` into ``repo`` and load it, with
    its instances in this process and (a second run of the test) in worker processes; a spec without
    a config, or with its own ``INSTANCE_ISOLATION``, is loaded as it is."""
    loaded: list[PythonTestModel] = []

    def load(name: str, spec: PythonModelSpec, *, auto_complete: bool = False) -> PythonTestModel:
        if spec.config is not None and "INSTANCE_ISOLATION" not in spec.config:
            spec = isolated(spec, isolation)
        model_dir = write_model(repo, name, spec)
        model = PythonTestModel(load_in_process(model_dir, auto_complete=auto_complete), model_dir)
        loaded.append(model)
        return model

    yield load
    for model in loaded:
        model.close()


@pytest.fixture
def http(server: ThreadedServer) -> Iterator[httpclient.InferenceServerClient]:
    """An HTTP client of the module's ``server`` fixture (a server running in this process)."""
    client = httpclient.InferenceServerClient(server.http_url)
    yield client
    client.close()
