"""TorchScript models served by the real server, queried with tritonclient over HTTP and gRPC.

One server (module scope) serves every model here; each test compares the server's answer with
the model's own in-process result.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, infer_through_shared_memory, start_server

from .models import (
    TORCHSCRIPT_DEPRECATION,
    AddSub,
    BatchSize,
    DictOut,
    Int64Affine,
    Linear,
    NamedArgs,
    Stats,
    Upper,
    add_torch_model,
    fp32,
    infer,
    reference,
    scripted,
    traced,
)

pytestmark = TORCHSCRIPT_DEPRECATION

CLIENTS = [pytest.param(httpclient, id="http"), pytest.param(grpcclient, id="grpc")]

ADD_SUB = """
max_batch_size: 8
input [
  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""

BATCHED = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "OUTPUT__1" data_type: TYPE_INT64 dims: [ 1 ] }
]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 500000 }
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


class Models:
    """Paths of the served model files, by model name."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, name: str) -> Path:
        return self.root / name / "1" / "model.pt"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Models]]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("pytorch") / "models")
    with torch.no_grad():
        _build(repository)
    server = start_server([repository.root], timeout=120)
    try:
        yield server, Models(repository.root)
    finally:
        server.stop()


def _build(repository: ModelRepositoryBuilder) -> None:
    add_torch_model(repository, "add_sub", scripted(AddSub()), ADD_SUB)
    add_torch_model(repository, "batched", scripted(BatchSize()), BATCHED)
    add_torch_model(
        repository,
        "named",
        scripted(NamedArgs()),
        """
        max_batch_size: 4
        input [ { name: "scale" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        parameters { key: "INTER_OP_THREAD_COUNT" value: { string_value: "1" } }
        """,
    )
    add_torch_model(
        repository,
        "stats",
        scripted(Stats()),
        """
        max_batch_size: 4
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [
          { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] },
          { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] },
          { name: "OUTPUT__2" data_type: TYPE_INT64 dims: [ 1 ] }
        ]
        parameters { key: "INTER_OP_THREAD_COUNT" value: { string_value: "2" } }
        """,
    )
    add_torch_model(
        repository,
        "dict_out",
        scripted(DictOut()),
        """
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [
          { name: "double" data_type: TYPE_FP32 dims: [ 3 ] },
          { name: "total" data_type: TYPE_FP32 dims: [ 1 ] }
        ]
        """,
    )
    add_torch_model(
        repository,
        "int64",
        scripted(Int64Affine()),
        """
        input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ -1 ] } ]
        parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
        """,
    )
    add_torch_model(
        repository,
        "linear",
        traced(Linear(), torch.zeros(1, 4)),
        """
        max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
    )
    add_torch_model(
        repository,
        "upper",
        scripted(Upper()),
        """
        input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
        """,
    )
    # Auto-complete: only the inputs are given; the outputs come from a probe run.
    add_torch_model(
        repository,
        "completed",
        scripted(Stats()),
        'max_batch_size: 4\ninput [ { name: "data" data_type: TYPE_FP32 dims: [ -1 ] } ]',
    )
    add_torch_model(
        repository,
        "wrong_type",
        scripted(Int64Affine()),
        """
        input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ 2 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
        """,
    )


@pytest.mark.parametrize("client_module", CLIENTS)
def test_add_sub(served: tuple[ServerProcess, Models], client_module: ModuleType) -> None:
    server, models = served
    a, b = fp32(3, 4, seed=1), fp32(3, 4, seed=2)
    result = infer(client_module, server, "add_sub", {"INPUT__0": (a, "FP32"), "INPUT__1": (b, "FP32")})
    expected = reference(models.file("add_sub"), a, b)
    np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), expected[0])
    np.testing.assert_allclose(result.as_numpy("OUTPUT__1"), expected[1])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_add_sub_through_system_shared_memory(served: tuple[ServerProcess, Models], protocol: str) -> None:
    server, models = served
    a, b = fp32(3, 4, seed=3), fp32(3, 4, seed=4)
    url = server.http_url if protocol == "http" else server.grpc_url
    result = infer_through_shared_memory(url, protocol, "add_sub", {"INPUT__0": a, "INPUT__1": b})
    expected = reference(models.file("add_sub"), a, b)
    np.testing.assert_allclose(result["OUTPUT__0"], expected[0])
    np.testing.assert_allclose(result["OUTPUT__1"], expected[1])


@pytest.mark.parametrize("client_module", CLIENTS)
def test_forward_argument_names_and_tuple_and_dict_outputs(
    served: tuple[ServerProcess, Models], client_module: ModuleType
) -> None:
    server, models = served
    x, scale = fp32(2, 3, seed=3), fp32(2, 3, seed=4)
    result = infer(client_module, server, "named", {"x": (x, "FP32"), "scale": (scale, "FP32")})
    np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), reference(models.file("named"), x=x, scale=scale))

    data = fp32(2, 3, seed=5)
    result = infer(client_module, server, "stats", {"INPUT__0": (data, "FP32")})
    expected = reference(models.file("stats"), data)
    for index in range(3):
        np.testing.assert_allclose(result.as_numpy(f"OUTPUT__{index}"), expected[index], rtol=1e-6)
    assert result.as_numpy("OUTPUT__2").dtype == np.int64

    result = infer(client_module, server, "dict_out", {"x": (data, "FP32")})
    expected = reference(models.file("dict_out"), data)
    np.testing.assert_allclose(result.as_numpy("double"), expected["double"])
    np.testing.assert_allclose(result.as_numpy("total"), expected["total"], rtol=1e-6)


@pytest.mark.parametrize("client_module", CLIENTS)
def test_int64_traced_and_string_models(served: tuple[ServerProcess, Models], client_module: ModuleType) -> None:
    server, models = served
    values = np.array([-(2**40), 0, 7, 2**33], np.int64)
    result = infer(client_module, server, "int64", {"INPUT__0": (values, "INT64")})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), reference(models.file("int64"), values))

    x = fp32(5, 4, seed=6)
    result = infer(client_module, server, "linear", {"x": (x, "FP32")})
    np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), reference(models.file("linear"), x), rtol=1e-6)

    words = np.array([b"triton", b"naiad"], dtype=np.object_)
    result = infer(client_module, server, "upper", {"words": (words, "BYTES")})
    expected = reference(models.file("upper"), ["triton", "naiad"])
    assert result.as_numpy("OUTPUT__0").tolist() == [word.encode() for word in expected]


@pytest.mark.parametrize("client_module", CLIENTS)
def test_auto_completed_outputs(served: tuple[ServerProcess, Models], client_module: ModuleType) -> None:
    server, models = served
    url = server.http_url if client_module is httpclient else server.grpc_url
    client = client_module.InferenceServerClient(url)
    try:
        extra = {} if client_module is httpclient else {"as_json": True}
        metadata = client.get_model_metadata("completed", **extra)
    finally:
        client.close()
    outputs = [(o["name"], o["datatype"], [int(d) for d in o["shape"]]) for o in metadata["outputs"]]
    assert outputs == [("OUTPUT__0", "FP32", [-1, -1]), ("OUTPUT__1", "FP32", [-1, 1]), ("OUTPUT__2", "INT64", [-1, 1])]
    data = fp32(3, 6, seed=7)
    result = infer(client_module, server, "completed", {"data": (data, "FP32")})
    expected = reference(models.file("completed"), data)
    np.testing.assert_allclose(result.as_numpy("OUTPUT__1"), expected[1], rtol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__2"), expected[2])


@pytest.mark.parametrize("client_module", CLIENTS)
def test_dynamic_batching_with_two_instances(served: tuple[ServerProcess, Models], client_module: ModuleType) -> None:
    server, models = served
    rows = [fp32(1, 2, seed=10 + index) for index in range(8)]

    def one(row: npt.NDArray[np.float32]) -> tuple[npt.NDArray[Any], int]:
        result = infer(client_module, server, "batched", {"INPUT__0": (row, "FP32")})
        return result.as_numpy("OUTPUT__0"), int(result.as_numpy("OUTPUT__1")[0, 0])

    with ThreadPoolExecutor(len(rows)) as pool:
        answers = list(pool.map(one, rows))
    for row, (doubled, _) in zip(rows, answers, strict=True):
        np.testing.assert_allclose(doubled, reference(models.file("batched"), row)[0])
    assert max(batch for _, batch in answers) > 1, "the dynamic batcher never merged requests"


@pytest.mark.parametrize("client_module", CLIENTS)
def test_output_datatype_mismatch_is_a_request_error(
    served: tuple[ServerProcess, Models], client_module: ModuleType
) -> None:
    server, _ = served
    with pytest.raises(InferenceServerException) as caught:
        infer(client_module, server, "wrong_type", {"INPUT__0": (np.array([1, 2], np.int64), "INT64")})
    assert "configuration expects datatype TYPE_FP32 for output 'OUTPUT__0', model provides TYPE_INT64" in str(
        caught.value.message()
    )


def test_thread_counts_are_process_wide(served: tuple[ServerProcess, Models]) -> None:
    server, _ = served
    client = httpclient.InferenceServerClient(server.http_url)
    for name in ("named", "stats", "int64"):
        assert client.is_model_ready(name)
    logs = server.logs()
    assert "Intra op thread count is set to 1 for model instance 'int64'" in logs
    assert "INTER_OP_THREAD_COUNT=" in logs  # the second model's value is ignored (or torch refused)
    assert "torch thread pools are process-wide" in logs or "torch sizes this pool once per process" in logs
