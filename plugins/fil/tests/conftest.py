"""Shared helpers: FIL config snippets, a module-wide server, and KServe clients for both protocols."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

PROTOCOLS = ["http", "grpc"]


def fil_config(*, header: str = "", **parameters: str) -> str:
    """``backend: "fil"`` plus ``header`` lines and FIL parameters (values are strings, as in Triton)."""
    lines = ['backend: "fil"', header]
    lines += [
        f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}' for key, value in parameters.items()
    ]
    return "\n".join(line for line in lines if line) + "\n"


def client_module(protocol: str) -> Any:
    return importlib.import_module(f"tritonclient.{protocol}")


@contextmanager
def connect(server: ServerProcess, protocol: str) -> Iterator[Any]:
    """A tritonclient ``InferenceServerClient`` for ``protocol``, closed afterwards."""
    module = client_module(protocol)
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    try:
        yield client
    finally:
        client.close()


def fil_shaped(expected: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A library's per-row answer (``[n, k]``) in the shape Triton's FIL backend answers it: without
    dimensions of size 1 after the rows (``[n, 1]`` is ``[n]``)."""
    return np.squeeze(expected, axis=tuple(axis for axis in range(1, expected.ndim) if expected.shape[axis] == 1))


def infer(server: ServerProcess, protocol: str, model: str, rows: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
    """``output__0`` for ``rows`` sent as ``input__0`` with tritonclient over ``protocol``."""
    module = client_module(protocol)
    tensor = module.InferInput("input__0", list(rows.shape), "FP32")
    tensor.set_data_from_numpy(rows)
    with connect(server, protocol) as client:
        result = client.infer(model, [tensor], outputs=[module.InferRequestedOutput("output__0")])
    output = result.as_numpy("output__0")
    assert output.dtype == np.float32
    return np.asarray(output)


ServeRepository = Callable[..., ServerProcess]


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeRepository]:
    """``module_server(fill, *flags)``: one server per test module for the repository ``fill`` writes.

    Starting naiad (and importing XGBoost in it) takes seconds on a shared CPU, so each test
    module serves all its models from one repository instead of one server per test.
    """
    started: list[ServerProcess] = []

    def serve(fill: Callable[[ModelRepositoryBuilder], None], *flags: str) -> ServerProcess:
        repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("models"))
        fill(repository)
        server = start_server([repository.root], *flags)
        started.append(server)
        return server

    yield serve
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def training_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("training")
