"""Stateful TorchScript models: sequence controls and implicit state, served by the real server.

Triton's pytorch backend feeds a sequence model its control tensors (START, END, READY, CORRID,
each named ``<name>__<index>``) and its implicit state as ``forward`` arguments, and reads the next
state from a ``<name>__<index>`` result. These tests drive such models with tritonclient's sequence
settings over HTTP and gRPC.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .models import TORCHSCRIPT_DEPRECATION, Accumulate, Controls, add_torch_model, scripted

pytestmark = TORCHSCRIPT_DEPRECATION

CLIENTS = [pytest.param(httpclient, id="http"), pytest.param(grpcclient, id="grpc")]

ACCUMULATE = """
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  control_input [
    { name: "START__2" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
  state [ { input_name: "INPUT_STATE__1" output_name: "OUTPUT_STATE__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
"""

CONTROLS = """
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUTPUT__1" data_type: TYPE_INT64 dims: [ 1 ] }
]
sequence_batching {
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END__2" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID__4" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 } ] }
  ]
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = ModelRepositoryBuilder(tmp_path_factory.mktemp("pytorch_sequences") / "models")
    add_torch_model(repository, "accumulate", scripted(Accumulate()), ACCUMULATE)
    add_torch_model(repository, "controls", scripted(Controls()), CONTROLS)
    process = start_server([repository.root], timeout=120)
    try:
        yield process
    finally:
        process.stop()


def step(
    client_module: ModuleType, server: ServerProcess, model: str, value: int, sequence_id: int, start: bool, end: bool
) -> dict[str, np.ndarray]:
    """One request of a sequence; returns every output."""
    url = server.http_url if client_module is httpclient else server.grpc_url
    client = client_module.InferenceServerClient(url)
    shape = [1, 1] if model == "accumulate" else [1]
    tensor = client_module.InferInput("INPUT__0", shape, "INT32")
    tensor.set_data_from_numpy(np.full(shape, value, np.int32))
    try:
        result = client.infer(model, [tensor], sequence_id=sequence_id, sequence_start=start, sequence_end=end)
    finally:
        client.close()
    names = ["OUTPUT__0"] if model == "accumulate" else ["OUTPUT__0", "OUTPUT__1"]
    return {name: result.as_numpy(name) for name in names}


@pytest.mark.parametrize("client_module", CLIENTS)
def test_implicit_state_carries_between_requests(server: ServerProcess, client_module: ModuleType) -> None:
    base = 100 if client_module is httpclient else 200
    totals = {base: [], base + 1: []}  # type: dict[int, list[int]]
    values = {base: [1, 2, 3], base + 1: [10, 20, 30]}
    for index in range(3):  # two sequences interleaved: each keeps its own state
        for sequence_id in (base, base + 1):
            outputs = step(
                client_module, server, "accumulate", values[sequence_id][index], sequence_id, index == 0, index == 2
            )
            assert outputs["OUTPUT__0"].shape == (1, 1)
            totals[sequence_id].append(int(outputs["OUTPUT__0"][0, 0]))
    assert totals == {base: [1, 3, 6], base + 1: [10, 30, 60]}


@pytest.mark.parametrize("client_module", CLIENTS)
def test_controls_reach_forward_by_index(server: ServerProcess, client_module: ModuleType) -> None:
    sequence_id = 42 if client_module is httpclient else 43
    answers = [
        step(client_module, server, "controls", 5, sequence_id, start, end)
        for start, end in ((True, False), (False, False), (False, True))
    ]
    assert [int(answer["OUTPUT__0"][0]) for answer in answers] == [106, 105, 115]  # READY, +START, +10 END
    assert [int(answer["OUTPUT__1"][0]) for answer in answers] == [sequence_id] * 3
    assert answers[0]["OUTPUT__1"].dtype == np.int64


def test_a_request_without_start_is_refused(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensor = grpcclient.InferInput("INPUT__0", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    with pytest.raises(Exception, match="must specify the START flag on the first request of the sequence"):
        client.infer("controls", [tensor], sequence_id=999)
    client.close()
